// Where a process says that it turned a connection away (a failed Handshake). It exists because
// a port reachable from the network gets probed, maybe thousands of times: the user must learn
// that something knocked, and from where, without the log filling up. So each remote address is
// named once per process (its first refusal), and past a bound on the addresses remembered,
// one last line says that further ones go unlogged.
package org.fsdp4j.comm;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

public final class RefusalLog {

    /** The first words of every line, for whoever reads or greps the log. */
    public static final String PREFIX = "fsdp4j: refused a connection to ";
    /** Addresses remembered (and named) at most: the log stays bounded whatever the network sends. */
    static final int MAX_ADDRESSES = 256;

    private final Consumer<String> sink;
    private final Set<String> named = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean full = new AtomicBoolean();
    private final AtomicLong refused = new AtomicLong();

    /** Lines go to {@code sink} (a test's list; stderr for a run). */
    public RefusalLog(Consumer<String> sink) {
        this.sink = sink;
    }

    /** Lines go to this process's stderr. */
    public static RefusalLog toStandardError() {
        return new RefusalLog(line -> {
            System.err.println(line);
            System.err.flush();
        });
    }

    /**
     * Counts a refused connection to {@code listener} ("the rendezvous store") from {@code remote},
     * and says so once per remote address: "... from 10.0.0.7:51234: it did not prove this job's
     * token (further ones from 10.0.0.7 are not logged)".
     */
    public void refused(String listener, SocketAddress remote, String why) {
        refused.incrementAndGet();
        String host = host(remote);
        if (named.size() >= MAX_ADDRESSES && !named.contains(host)) {
            if (full.compareAndSet(false, true)) {
                sink.accept(PREFIX + listener + " from " + describe(remote) + ": " + why + " (connections refused from"
                        + " " + MAX_ADDRESSES + " other addresses already: further ones are not logged)");
            }
            return;
        }
        if (named.add(host)) {
            sink.accept(PREFIX + listener + " from " + describe(remote) + ": " + why + " (further ones from " + host
                    + " are not logged)");
        }
    }

    /** Connections refused so far, logged or not. */
    public long count() {
        return refused.get();
    }

    private static String host(SocketAddress remote) {
        if (remote instanceof InetSocketAddress i) {
            InetAddress a = i.getAddress();
            return a != null ? a.getHostAddress() : i.getHostString();
        }
        return String.valueOf(remote);
    }

    private static String describe(SocketAddress remote) {
        if (remote instanceof InetSocketAddress i) {
            String h = host(remote);
            return (h.contains(":") ? "[" + h + "]" : h) + ":" + i.getPort();
        }
        return String.valueOf(remote);
    }
}
