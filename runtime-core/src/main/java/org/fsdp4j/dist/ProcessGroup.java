// This process's membership in a run of several: what every process does at start, and what it
// shares with the others until the end. join() serves the rendezvous store from the process of
// rank 0 (StoreServer) and connects every process to it, claims this process's rank (two
// processes cannot hold one), publishes where it accepts its peers' connections, then waits for
// every process and checks that all were started with the same settings (each process checks
// all of them, so every one fails with the same list of differences). Then it hands out the
// TCP groups the ranks talk through, agrees with the others on a stop at a step boundary, keeps
// the reason of an abort for all to read (ProcessDirectory), and at close waits for every
// process before the store goes away.
package org.fsdp4j.dist;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.fsdp4j.comm.PeerListener;
import org.fsdp4j.comm.ProcessDirectory;
import org.fsdp4j.comm.TcpGroup;

public final class ProcessGroup implements ProcessDirectory, AutoCloseable {

    /** How long leaving a reason for an abort, or reading one, may take (the store may be gone). */
    private static final Duration ABORT_CALL_TIMEOUT = Duration.ofSeconds(5);
    /** How often a process waiting for the others at a step boundary looks for a dead or aborted peer. */
    private static final Duration LIVENESS_POLL = Duration.ofSeconds(1);

    private final ProcessIdentity identity;
    private final Duration timeout;
    private final StoreServer server;          // rank 0 only
    private final StoreClient control;         // join, votes, shutdown
    private final StoreClient aborts;          // abort reasons, with a short timeout
    private final PeerListener listener;
    private final InetSocketAddress[] addresses;
    private final List<TcpGroup> groups = new ArrayList<>();
    private volatile boolean failed;
    private boolean closed;

    private ProcessGroup(ProcessIdentity identity, Duration timeout, StoreServer server, StoreClient control,
                         StoreClient aborts, PeerListener listener, InetSocketAddress[] addresses) {
        this.identity = identity;
        this.timeout = timeout;
        this.server = server;
        this.control = control;
        this.aborts = aborts;
        this.listener = listener;
        this.addresses = addresses;
    }

    /**
     * Joins the run {@code identity} belongs to, waiting up to {@code timeout} for every process;
     * {@code settings} are this process's resolved configuration (Settings.of), which must equal
     * every other process's. Throws RendezvousException (the run cannot form) or
     * ConfigMismatchException (it formed, but its processes disagree).
     */
    public static ProcessGroup join(ProcessIdentity identity, Map<String, String> settings, Duration timeout) {
        int p = identity.rank();
        int count = identity.count();
        StoreServer server = p == 0 ? StoreServer.start(identity.masterPort()) : null;
        List<AutoCloseable> made = new ArrayList<>();
        if (server != null) {
            made.add(server);
        }
        try {
            StoreClient control = add(made, StoreClient.connect(identity.masterAddr(), identity.masterPort(), timeout));
            StoreClient aborts = add(made, StoreClient.connect(identity.masterAddr(), identity.masterPort(),
                    ABORT_CALL_TIMEOUT));
            byte[] nonce = new byte[16];
            new SecureRandom().nextBytes(nonce);
            String mine = java.util.HexFormat.of().formatHex(nonce);
            String claimedBy = new String(control.compareSet("process/" + p + "/claim", new byte[0],
                    mine.getBytes(StandardCharsets.UTF_8)), StandardCharsets.UTF_8);
            if (!claimedBy.equals(mine)) {
                throw new RendezvousException("two processes claim process rank " + p + " of the run at "
                        + control.address() + ": give each process its own rank (RANK, SLURM_PROCID, --process-rank)");
            }
            control.set(StoreServer.ALIVE + "process " + p, "1");
            long runId;
            if (p == 0) {
                runId = new SecureRandom().nextLong();
                control.set("run/id", Long.toString(runId));
            } else {
                runId = Long.parseLong(waitFor(control, "run/id", "process 0", timeout));
            }
            PeerListener listener = add(made, PeerListener.open(runId));
            InetSocketAddress here = listener.address(control.localAddress());
            control.set("process/" + p + "/address", here.getAddress().getHostAddress() + ":" + here.getPort());
            Map<String, String> withLayout = new LinkedHashMap<>(settings);
            withLayout.put("processes", Integer.toString(count));
            control.set("process/" + p + "/settings", Settings.encode(withLayout));
            @SuppressWarnings("unchecked")
            Map<String, String>[] all = new Map[count];
            InetSocketAddress[] addresses = new InetSocketAddress[count];
            for (int q = 0; q < count; q++) {
                all[q] = Settings.decode(waitFor(control, "process/" + q + "/settings", "process " + q, timeout));
                if (q == 0 && !all[0].get("processes").equals(Integer.toString(count))) {
                    throw new ConfigMismatchException("the processes disagree on how many they are: process 0 says "
                            + all[0].get("processes") + ", this one (process " + p + ") says " + count
                            + " (WORLD_SIZE, SLURM_NTASKS or --processes)");
                }
                String[] hostPort = control.getString("process/" + q + "/address", timeout).split(":");
                addresses[q] = new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1]));
            }
            String diff = Settings.differences(all);
            if (diff != null) {
                throw new ConfigMismatchException("the " + count + " processes were started with different settings ("
                        + diff + "): start every process with the same flags");
            }
            return new ProcessGroup(identity, timeout, server, control, aborts, listener, addresses);
        } catch (RuntimeException e) {
            for (int i = made.size() - 1; i >= 0; i--) {
                try {
                    made.get(i).close();
                } catch (Exception ignored) {
                    // the failure that got us here is what the user needs to see
                }
            }
            throw e;
        }
    }

    private static <T extends AutoCloseable> T add(List<AutoCloseable> made, T t) {
        made.add(t);
        return t;
    }

    /** The value of {@code key}, which {@code who} sets when it joins; names who did not come in time. */
    private static String waitFor(StoreClient store, String key, String who, Duration timeout) {
        try {
            return store.getString(key, timeout);
        } catch (StoreClient.TimeoutException e) {
            throw new RendezvousException(who + " did not join the run at " + store.address() + " within "
                    + StoreClient.seconds(timeout) + ": is it running, with the same master address and port? (under"
                    + " Slurm, start the processes with srun: the batch script alone is one process)", e);
        }
    }

    public ProcessIdentity identity() {
        return identity;
    }

    /**
     * This process's share of a world of {@code worldSize} ranks, connected over TCP; every
     * process makes its groups in the same order (the order names them).
     */
    public synchronized TcpGroup ranks(int worldSize, Duration collectiveTimeout) {
        TcpGroup g = new TcpGroup("g" + (groups.size() + 1), worldSize, this, collectiveTimeout);
        groups.add(g);
        return g;
    }

    /**
     * Whether the run stops after step {@code step}: every process calls it at the same step
     * boundary with the reason it was asked to stop (a signal's name), or null; all get the same
     * answer, the first reason given, or null to go on. Fails (RendezvousException) when a process
     * died or the run was aborted meanwhile.
     */
    public String agreeToStop(int step, String reason) {
        String base = "stop/" + step;
        if (reason != null) {
            control.compareSet(base + "/why", new byte[0], reason.getBytes(StandardCharsets.UTF_8));
        }
        meetAll(base, "the end of step " + step);
        String why = control.check(base + "/why") ? control.getString(base + "/why", Duration.ZERO) : null;
        if (identity.rank() == 0 && step > 2) {           // every process is past step − 2's vote by now
            for (String k : List.of("why", "arrived", "done")) {
                control.delete("stop/" + (step - 2) + "/" + k);
            }
        }
        return why;
    }

    /**
     * Returns once every process has called it with {@code base}; throws a RendezvousException
     * as soon as a process is found dead or the run aborted, or after the timeout. {@code where}
     * says in messages where the processes were to meet.
     */
    private void meetAll(String base, String where) {
        if (control.add(base + "/arrived", 1) == identity.count()) {
            control.set(base + "/done", "1");
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            try {
                control.get(base + "/done", LIVENESS_POLL);
                return;
            } catch (StoreClient.TimeoutException e) {
                Optional<String> aborted = publishedAbort();
                if (aborted.isPresent()) {
                    throw new RendezvousException("the run was aborted: " + aborted.get());
                }
                if (control.check("dead")) {
                    throw new RendezvousException(control.getString("dead", Duration.ZERO) + " ended without a word (its"
                            + " connection to the store closed) while the others waited at " + where);
                }
                if (System.nanoTime() > deadline) {
                    throw new RendezvousException("the processes did not all reach " + where + " within "
                            + StoreClient.seconds(timeout));
                }
            }
        }
    }

    /**
     * This process failed for {@code reason} outside any collective (before its ranks could
     * report it themselves): leaves the reason for the others and closes every connection, so
     * they stop now rather than at their timeout.
     */
    public void fail(String reason) {
        failed = true;
        publishAbort("process " + identity.rank() + " failed: " + reason);
        List<TcpGroup> all;
        synchronized (this) {
            all = List.copyOf(groups);
        }
        all.forEach(TcpGroup::close);
    }

    // ------------------------------------------------------------------ ProcessDirectory

    @Override
    public int process() {
        return identity.rank();
    }

    @Override
    public int processCount() {
        return identity.count();
    }

    @Override
    public PeerListener listener() {
        return listener;
    }

    @Override
    public InetSocketAddress addressOf(int process, Duration wait) {
        return addresses[process];
    }

    @Override
    public String publishAbort(String reason) {
        try {
            return new String(aborts.compareSet("abort", new byte[0], reason.getBytes(StandardCharsets.UTF_8)),
                    StandardCharsets.UTF_8);
        } catch (RuntimeException storeGone) {
            return reason;
        }
    }

    @Override
    public Optional<String> publishedAbort() {
        try {
            return aborts.check("abort") ? Optional.of(aborts.getString("abort", Duration.ZERO)) : Optional.empty();
        } catch (RuntimeException storeGone) {
            return Optional.empty();
        }
    }

    /**
     * Leaves the run: unless it failed, waits (up to the timeout) until every process has got
     * here, so the store outlives everyone's last use of it; then closes the connections, the
     * listener and, in process 0, the store. Idempotent.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        boolean clean = !failed && groups.stream().noneMatch(TcpGroup::isAborted) && publishedAbort().isEmpty();
        try {
            if (clean) {
                control.delete(StoreServer.ALIVE + "process " + identity.rank());
                meetAll("shutdown", "the end of the run");
                if (identity.rank() != 0) {
                    control.add("shutdown/left", 1);
                } else {
                    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
                    while (control.add("shutdown/left", 0) < identity.count() - 1 && System.nanoTime() < deadline) {
                        Thread.sleep(10);
                    }
                }
            }
        } catch (RuntimeException e) {
            // leaving anyway: whatever went wrong has been reported by whoever saw it
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            groups.forEach(TcpGroup::close);
            listener.close();
            control.close();
            aborts.close();
            if (server != null) {
                server.close();
            }
        }
    }

    @Override
    public String toString() {
        return identity.toString();
    }
}
