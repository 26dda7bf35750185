// Where the threads of an in-process group meet: each phase of a collective is one exchange in
// which every rank deposits a value and gets back everyone's. Waits are bounded by the group
// timeout; a rank that never arrives is named in the error and the whole group is aborted, so
// no thread waits forever (see GroupFate).
package org.fsdp4j.comm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

final class Rendezvous {

    private final String name;
    private final int[] globalRanks;    // member i of this group is world rank globalRanks[i]
    private final Duration timeout;
    private final GroupFate fate;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final Object[] slots;
    private final boolean[] arrived;
    private int arrivedCount;
    private long generation;            // completed phases
    private Object[] lastResult;        // everyone's deposits of the last completed phase

    Rendezvous(String name, int[] globalRanks, Duration timeout, GroupFate fate) {
        this.name = name;
        this.globalRanks = globalRanks.clone();
        this.timeout = timeout;
        this.fate = fate;
        this.slots = new Object[globalRanks.length];
        this.arrived = new boolean[globalRanks.length];
        fate.register(this);
    }

    String name() {
        return name;
    }

    int size() {
        return globalRanks.length;
    }

    int globalRank(int member) {
        return globalRanks[member];
    }

    Duration timeout() {
        return timeout;
    }

    GroupFate fate() {
        return fate;
    }

    /**
     * Deposits {@code value} as member {@code member}, waits for all members, and returns every
     * member's deposit (index = member). {@code where} labels errors ("allGather #3 on 'world' at rank 1").
     */
    Object[] exchange(int member, Object value, String where) {
        CommException timedOut = null;
        lock.lock();
        try {
            fate.check(where);
            long myGeneration = generation;
            slots[member] = value;
            arrived[member] = true;
            arrivedCount++;
            if (arrivedCount == slots.length) {
                lastResult = slots.clone();
                Arrays.fill(slots, null);
                Arrays.fill(arrived, false);
                arrivedCount = 0;
                generation++;
                changed.signalAll();
                return lastResult;
            }
            long remainingNanos = timeout.toNanos();
            while (generation == myGeneration) {
                fate.check(where);
                if (remainingNanos <= 0) {
                    timedOut = new CommException(where + ": " + missingRanks() + " did not arrive within "
                            + timeout.toMillis() + " ms; aborting the group");
                    break;
                }
                remainingNanos = changed.awaitNanos(remainingNanos);
            }
            if (timedOut == null) {
                return lastResult;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            timedOut = new CommException(where + ": interrupted while waiting for " + missingRanks());
        } finally {
            lock.unlock();
        }
        fate.abort(timedOut);         // outside the lock: abort takes every rendezvous's lock in turn
        throw timedOut;
    }

    /** A phase in which nothing is exchanged. */
    void barrier(int member, String where) {
        exchange(member, Boolean.TRUE, where);
    }

    void wakeAll() {
        lock.lock();
        try {
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private String missingRanks() {
        List<String> missing = new ArrayList<>();
        for (int i = 0; i < arrived.length; i++) {
            if (!arrived[i]) {
                missing.add(globalRanks[i] == i ? String.valueOf(i) : globalRanks[i] + " (member " + i + " of '" + name + "')");
            }
        }
        return (missing.size() == 1 ? "rank " : "ranks ") + String.join(", ", missing);
    }
}
