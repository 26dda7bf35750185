// The abort state shared by a local world group and every group split from it: the first
// failure poisons them all and wakes every rank waiting in any rendezvous, so a failed or
// missing rank makes the others' collectives fail promptly (and with them their streams)
// instead of hanging. Groups that span processes also close their sockets then (onAbort), so
// the other processes stop too.
package org.fsdp4j.comm;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

final class GroupFate {

    private volatile CommException cause;
    private final List<Rendezvous> rendezvous = new CopyOnWriteArrayList<>();
    private final Map<String, Rendezvous> subgroups = new ConcurrentHashMap<>();
    private final List<Runnable> onAbort = new CopyOnWriteArrayList<>();

    /** Throws if the group was aborted: {@code where} names the operation and rank that noticed. */
    void check(String where) {
        CommException c = cause;
        if (c != null) {
            throw new CommException(where + ": group aborted: " + c.getMessage(), c);
        }
    }

    boolean isAborted() {
        return cause != null;
    }

    /** Records the first cause, then wakes every waiter (queued collectives fail fast at their check). */
    void abort(CommException why) {
        synchronized (this) {
            if (cause != null) {
                return;
            }
            cause = why;
        }
        for (Rendezvous r : rendezvous) {
            r.wakeAll();
        }
        for (Runnable hook : onAbort) {
            hook.run();
        }
    }

    /** Runs {@code hook} once the group is aborted (at once if it already is): a transport closing its sockets. */
    void onAbort(Runnable hook) {
        onAbort.add(hook);
        if (cause != null) {
            hook.run();
        }
    }

    /** The first cause, or null while the group is healthy. */
    CommException cause() {
        return cause;
    }

    void register(Rendezvous r) {
        rendezvous.add(r);
        if (cause != null) {
            r.wakeAll();
        }
    }

    /** The one Rendezvous object all members of a split share, created by whichever member gets there first. */
    Rendezvous subgroup(String key, Function<String, Rendezvous> create) {
        return subgroups.computeIfAbsent(key, create);
    }
}
