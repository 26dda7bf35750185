// This process's membership in a run of several: what every process does at start, and what it
// shares with the others until the end. join() serves the rendezvous store from the process of
// rank 0 (StoreServer, on the master address only) and connects every process to it, every
// connection proving the job's token (JobAccess; a run that may span hosts needs one), claims
// this process's rank (two processes cannot hold one), publishes where it accepts its peers'
// connections (the interface that reaches the store), then waits for every process and checks
// that all were started with the same settings (each process checks all of them, so every one
// fails with the same list of differences). Then it hands out the
// TCP groups the ranks talk through, agrees with the others on a stop at a step boundary, keeps
// the reason of an abort for all to read (ProcessDirectory), and at close waits for every
// process before the store goes away. A heartbeat thread bumps this process's counter in the
// store twice a second, so that a process waiting for a stopped (SIGSTOP) peer can name it; each
// process's host is kept for messages. Work beside the step (a checkpoint's commit) meets the
// others through a store connection of its own (publish, await), so it never waits behind
// the step's vote. The vote can carry each process's figures of the step to process 0, which
// reports for the whole run.
package org.fsdp4j.dist;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.Processes;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.PeerListener;
import org.fsdp4j.comm.ProcessDirectory;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.comm.RefusalLog;
import org.fsdp4j.comm.RankGroups;
import org.fsdp4j.comm.TcpGroup;

public final class ProcessGroup implements ProcessDirectory, Processes.Membership, AutoCloseable {

    /** How long leaving a reason for an abort, or reading one, may take (the store may be gone). */
    private static final Duration ABORT_CALL_TIMEOUT = Duration.ofSeconds(3);
    /** How often a process waiting for the others at a step boundary looks for a dead or aborted peer. */
    private static final Duration LIVENESS_POLL = Duration.ofSeconds(1);
    /** How often the heartbeat thread bumps this process's counter. */
    private static final long HEARTBEAT_MILLIS = 500;

    private final ProcessIdentity identity;
    private final Duration timeout;
    private final StoreServer server;          // rank 0 only
    private final StoreClient control;         // join, votes, shutdown
    private final StoreClient aborts;          // abort reasons and liveness, with a short timeout
    private final StoreClient background;      // meetings beside the step (checkpoint commits)
    private final StoreClient heartbeats;      // the heartbeat thread's own
    private final PeerListener listener;
    private final InetSocketAddress[] addresses;
    private final String[] hosts;
    private final Thread heartbeat;
    private final List<RankGroup> groups = new ArrayList<>();
    private volatile int ranksPerProcess;      // known once the first group of ranks is made
    private volatile boolean failed;
    private boolean closed;

    private ProcessGroup(ProcessIdentity identity, Duration timeout, StoreServer server, StoreClient control,
                         StoreClient aborts, StoreClient background, StoreClient heartbeats, PeerListener listener,
                         InetSocketAddress[] addresses, String[] hosts) {
        this.identity = identity;
        this.timeout = timeout;
        this.server = server;
        this.control = control;
        this.aborts = aborts;
        this.background = background;
        this.heartbeats = heartbeats;
        this.listener = listener;
        this.addresses = addresses;
        this.hosts = hosts;
        this.heartbeat = new Thread(this::beat, "fsdp4j-heartbeat");
        heartbeat.setDaemon(true);
        heartbeat.start();
    }

    /** The heartbeat thread: bumps heartbeat/P until the group closes or the store is gone. */
    private void beat() {
        String key = "heartbeat/" + identity.rank();
        try {
            while (!Thread.currentThread().isInterrupted()) {
                heartbeats.add(key, 1);
                Thread.sleep(HEARTBEAT_MILLIS);
            }
        } catch (InterruptedException e) {
            // closing
        } catch (RuntimeException storeGone) {
            // the store went away or the client was closed: nobody is left to tell
        }
    }

    /** This machine's name for messages ("node17"), or its address when it has no name. */
    static String localHostName() {
        try {
            return java.net.InetAddress.getLocalHost().getHostName();
        } catch (java.io.IOException e) {
            return "unknown host";
        }
    }

    /**
     * Joins the run {@code identity} belongs to, waiting up to {@code timeout} for every process;
     * {@code settings} are this process's resolved configuration (Settings.of), which must equal
     * every other process's. Throws RendezvousException (the run cannot form) or
     * ConfigMismatchException (it formed, but its processes disagree).
     */
    public static ProcessGroup join(ProcessIdentity identity, Map<String, String> settings, Duration timeout) {
        identity.requireTokenAcrossHosts();
        int p = identity.rank();
        FaultPoint.reach(FaultPoint.BEFORE_MEETING, p);
        int count = identity.count();
        JobToken token = identity.access().token();
        RefusalLog refusals = RefusalLog.toStandardError();     // one per process: each address named once
        StoreServer server = p == 0 ? StoreServer.start(storeAddress(identity), identity.masterPort(), token, refusals)
                : null;
        List<AutoCloseable> made = new ArrayList<>();
        if (server != null) {
            made.add(server);
        }
        try {
            String host = identity.masterAddr();
            int port = identity.masterPort();
            // the first connection waits for process 0's store, and says so every so often
            StoreClient control = add(made, StoreClient.connect(host, port, timeout, token, (progress, lastTry) ->
                    System.err.println(WaitNotices.PREFIX + "process 0 (of " + count + "), which serves the rendezvous"
                            + " store, at " + host + ":" + port + ": " + progress + "; start it, or check the master"
                            + " address and port (MASTER_ADDR and MASTER_PORT, or --master-addr and --master-port)"
                            + " of this process (last try: " + lastTry + ")")));
            StoreClient aborts = add(made, StoreClient.connect(host, port, ABORT_CALL_TIMEOUT, token));
            StoreClient background = add(made, StoreClient.connect(host, port, timeout, token));
            StoreClient heartbeats = add(made, StoreClient.connect(host, port, ABORT_CALL_TIMEOUT, token));
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
            PeerListener listener = add(made, PeerListener.open(runId, token, peerAddress(identity, control.localAddress()),
                    refusals));
            InetSocketAddress here = listener.address(control.localAddress());
            control.set("process/" + p + "/address", here.getAddress().getHostAddress() + ":" + here.getPort());
            control.set("process/" + p + "/host", localHostName());
            Map<String, String> withLayout = new LinkedHashMap<>(settings);
            withLayout.put("processes", Integer.toString(count));
            control.set("process/" + p + "/settings", Settings.encode(withLayout));
            @SuppressWarnings("unchecked")
            Map<String, String>[] all = new Map[count];
            InetSocketAddress[] addresses = new InetSocketAddress[count];
            String[] hosts = new String[count];
            String[] encoded = awaitEveryProcess(control, count, timeout);
            for (int q = 0; q < count; q++) {
                all[q] = Settings.decode(encoded[q]);
                if (q == 0 && !all[0].get("processes").equals(Integer.toString(count))) {
                    throw new ConfigMismatchException("the processes disagree on how many they are: process 0 says "
                            + all[0].get("processes") + ", this one (process " + p + ") says " + count
                            + " (WORLD_SIZE, SLURM_NTASKS or --processes)");
                }
                String[] hostPort = control.getString("process/" + q + "/address", timeout).split(":");
                addresses[q] = new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1]));
                hosts[q] = control.getString("process/" + q + "/host", timeout);
            }
            // every process has read every other's settings before any acts on a difference: process 0
            // serves the store, and leaving at once would cut off one still reading (which would then
            // report a lost store, exit 10, instead of the difference, exit 11)
            try {
                control.barrier("run/settings-read", p, count, timeout);
            } catch (StoreClient.TimeoutException e) {
                throw new RendezvousException(e.getMessage() + " at " + control.address()
                        + " while the processes compared their settings", e);
            }
            String diff = Settings.differences(all);
            if (diff != null) {
                throw new ConfigMismatchException("the " + count + " processes were started with different settings ("
                        + diff + "): start every process with the same flags");
            }
            return new ProcessGroup(identity, timeout, server, control, aborts, background, heartbeats, listener,
                    addresses, hosts);
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

    /**
     * Where process 0 serves the store: FSDP4J_STORE_BIND when set ("0.0.0.0" or "::": every
     * interface), else the master address, which must then be an address of this host (the store
     * is served only where the job's processes reach it).
     */
    static InetAddress storeAddress(ProcessIdentity identity) {
        String override = identity.access().storeBind();
        String name = override != null ? override : identity.masterAddr();
        String source = override != null ? JobAccess.STORE_BIND_VARIABLE
                : "the master address (--master-addr, MASTER_ADDR or Slurm's first node)";
        InetAddress a = resolve(name, source);
        if (!isLocal(a)) {
            throw new RendezvousException("process 0 serves the rendezvous store on " + source + " " + name
                    + (name.equals(a.getHostAddress()) ? "" : " (" + a.getHostAddress() + ")") + ", which is not an address"
                    + " of this host (" + localHostName() + "): start process 0 on that host, or set "
                    + JobAccess.STORE_BIND_VARIABLE + " to an address of this one (0.0.0.0: every interface)");
        }
        return a;
    }

    /**
     * Where this process listens for its peers: FSDP4J_PEER_BIND when set, else {@code towardStore},
     * the address of the interface it reaches the store through (the others reach it there too).
     */
    static InetAddress peerAddress(ProcessIdentity identity, InetAddress towardStore) {
        String override = identity.access().peerBind();
        if (override == null) {
            return towardStore;
        }
        InetAddress a = resolve(override, JobAccess.PEER_BIND_VARIABLE);
        if (!isLocal(a)) {
            throw new RendezvousException(JobAccess.PEER_BIND_VARIABLE + " " + override + " is not an address of this host ("
                    + localHostName() + "): give one of its addresses (0.0.0.0: every interface), or unset it");
        }
        return a;
    }

    private static InetAddress resolve(String name, String source) {
        try {
            return InetAddress.getByName(name);
        } catch (java.net.UnknownHostException e) {
            throw new RendezvousException(source + " '" + name + "' does not resolve to an address", e);
        }
    }

    /** Whether {@code a} is the wildcard, a loopback address or an address of one of this host's interfaces. */
    static boolean isLocal(InetAddress a) {
        if (a.isAnyLocalAddress() || a.isLoopbackAddress()) {
            return true;
        }
        try {
            return java.net.NetworkInterface.getByInetAddress(a) != null;
        } catch (java.net.SocketException e) {
            return false;
        }
    }

    private static <T extends AutoCloseable> T add(List<AutoCloseable> made, T t) {
        made.add(t);
        return t;
    }

    /**
     * Every process's settings, by process, once each has joined (set process/q/settings). While
     * some are missing it names them on stderr every so often (WaitNotices); when the timeout
     * passes it throws naming every process that did not come.
     */
    private static String[] awaitEveryProcess(StoreClient store, int count, Duration timeout) {
        WaitNotices notices = new WaitNotices(timeout);
        long deadline = System.nanoTime() + timeout.toNanos();
        String[] encoded = new String[count];
        List<Integer> missing = List.of();            // as of the last notice
        for (int q = 0; q < count; q++) {
            while (encoded[q] == null) {
                long left = deadline - System.nanoTime();
                String key = "process/" + q + "/settings";
                try {
                    if (left <= 0) {
                        missing = missing(store, count);
                        if (missing.isEmpty()) {        // the last came just now
                            encoded[q] = store.getString(key, Duration.ZERO);
                            continue;
                        }
                        throw new RendezvousException(WaitNotices.processes(missing) + " (of " + count + ") did not join"
                                + " the run at " + store.address() + " within " + StoreClient.seconds(timeout) + ": "
                                + (missing.size() == 1 ? "is it" : "are they") + " running, with the same master address"
                                + " and port? (under Slurm, start the processes with srun: the batch script alone is one"
                                + " process)");
                    }
                    encoded[q] = store.getString(key, Duration.ofNanos(Math.min(left, notices.untilNext().toNanos())));
                } catch (StoreClient.TimeoutException e) {
                    Optional<String> progress = notices.due();
                    if (progress.isPresent()) {
                        missing = missing(store, count);
                        boolean one = missing.size() == 1;
                        System.err.println(WaitNotices.PREFIX + WaitNotices.processes(missing) + " (of " + count
                                + ") to join at " + store.address() + ": " + progress.get() + "; start "
                                + (one ? "it" : "them") + ", or check " + (one ? "its" : "their") + " master address and"
                                + " port (MASTER_ADDR and MASTER_PORT, or --master-addr and --master-port)");
                    }
                } catch (RendezvousException e) {
                    if (!(e.getCause() instanceof java.io.IOException)) {
                        throw e;            // not a lost store: the give-up above, or a refusal
                    }
                    // the store went away: process 0 gave up waiting too (or failed) before this one did
                    throw new RendezvousException(e.getMessage() + ", while the processes waited for "
                            + WaitNotices.processes(missing.isEmpty() ? List.of(q) : missing) + " (of " + count
                            + ") to join", e);
                }
            }
        }
        return encoded;
    }

    /** The processes that have not joined yet (not set process/q/settings). */
    private static List<Integer> missing(StoreClient store, int count) {
        List<Integer> missing = new ArrayList<>();
        for (int q = 0; q < count; q++) {
            if (!store.check("process/" + q + "/settings")) {
                missing.add(q);
            }
        }
        return missing;
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
        TcpGroup g = new TcpGroup(nextGroupKey(), worldSize, this, collectiveTimeout);
        ranksPerProcess = worldSize / identity.count();
        groups.add(g);
        return g;
    }

    /**
     * This process's share of a world of {@code worldSize} ranks, rank firstRank + l on {@code
     * localDevices.get(l)}: over TCP on the CPU, over NCCL on GPUs (its unique ids through the
     * store). Every process makes its groups in the same order (the order names them).
     */
    public synchronized RankGroup ranks(int worldSize, Duration collectiveTimeout, List<Device> localDevices) {
        String key = nextGroupKey();
        ranksPerProcess = worldSize / identity.count();
        RankGroup g = RankGroups.acrossProcesses(localDevices, worldSize, this, key, collectiveTimeout);
        groups.add(g);
        return g;
    }

    private String nextGroupKey() {
        return "g" + (groups.size() + 1);
    }

    /**
     * Whether the run stops after step {@code step}: every process calls it at the same step
     * boundary with the reason it was asked to stop (a signal's name), or null; all get the same
     * answer, the first reason given, or null to go on. Fails (CommException) when a process
     * died or the run was aborted meanwhile.
     */
    public String agreeToStop(int step, String reason) {
        return agreeToStop(step, reason, null).reason();
    }

    /**
     * The stop vote of {@link #agreeToStop(int, String)}, carrying this process's {@code figures}
     * for the step (what its ranks measured) to process 0, or nothing when null. Every process
     * must pass figures at a step, or none. Process 0 gets every process's, by process (its own
     * first); the others get none. The cost, on top of the vote's: two store round trips on each
     * process other than 0 (it sets its figures before it arrives, and removes those of two votes
     * ago, which process 0 has read) and one per other process on process 0 (it reads them once
     * all have arrived).
     */
    public StopVote agreeToStop(int step, String reason, byte[] figures) {
        return onStore(() -> {
            String base = "stop/" + step;
            if (reason != null) {
                control.compareSet(base + "/why", new byte[0], reason.getBytes(StandardCharsets.UTF_8));
            }
            if (figures != null && identity.rank() != 0) {
                control.set(base + "/figures/" + identity.rank(), figures);
                if (step > 2) {         // process 0 read them before it arrived at the last vote, which this one passed
                    control.delete("stop/" + (step - 2) + "/figures/" + identity.rank());
                }
            }
            meetAll(control, base, "the end of step " + step, timeout);
            String why = control.check(base + "/why") ? control.getString(base + "/why", Duration.ZERO) : null;
            List<byte[]> byProcess = null;
            if (figures != null && identity.rank() == 0) {
                byProcess = new ArrayList<>(List.of(figures));
                for (int q = 1; q < identity.count(); q++) {
                    byProcess.add(control.get(base + "/figures/" + q, Duration.ZERO));   // set before q arrived
                }
            }
            if (identity.rank() == 0 && step > 2) {           // every process is past step − 2's vote by now
                for (String k : List.of("why", "arrived", "done")) {
                    control.delete("stop/" + (step - 2) + "/" + k);
                }
            }
            return new StopVote(why, byProcess == null ? null : List.copyOf(byProcess));
        });
    }

    /**
     * What a stop vote decided: the agreed reason to stop (null: go on), and on process 0 every
     * process's figures by process, when they were carried (else null).
     */
    public record StopVote(String reason, List<byte[]> figuresByProcess) {
    }

    /**
     * On the thread that votes on stops (the step's store connection, so it never waits behind
     * work beside the step): every process's {@code mine}, by process, once every process has
     * called it with {@code name} (each name once per run). Fails (CommException) as soon as a
     * process is found dead or the run aborted, or after the timeout; {@code what} names the
     * values in messages ("the figures for the summary").
     */
    public List<byte[]> exchange(String name, byte[] mine, String what) {
        return onStore(() -> {
            String base = "exchange/" + name + "/";
            control.set(base + identity.rank(), mine);
            List<byte[]> byProcess = new ArrayList<>();
            for (int q = 0; q < identity.count(); q++) {
                byProcess.add(q == identity.rank() ? mine : awaitOn(control, base + q, what + " of " + describe(q), timeout));
            }
            return List.copyOf(byProcess);
        });
    }

    /**
     * Returns once every process has called it with {@code base}; throws a CommException (a
     * process failed: the run formed, so this is a failed rank, not a failed rendezvous) as soon
     * as a process is found dead or the run aborted, or after the timeout. {@code where} says in
     * messages where the processes were to meet.
     */
    private void meetAll(StoreClient client, String base, String where, Duration timeout) {
        if (client.add(base + "/arrived", 1) == identity.count()) {
            client.set(base + "/done", "1");
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            try {
                client.get(base + "/done", LIVENESS_POLL);
                return;
            } catch (StoreClient.TimeoutException e) {
                Optional<String> why = failure();
                if (why.isPresent()) {
                    throw new CommException(why.get() + ", while the others waited at " + where);
                }
                if (System.nanoTime() > deadline) {
                    throw new CommException("the processes did not all reach " + where + " within "
                            + StoreClient.seconds(timeout) + stalledSuffix());
                }
            }
        }
    }

    @Override
    public String describe(int process) {
        int k = ranksPerProcess;
        String ranks = k == 0 ? "" : k == 1 ? "rank " + process + ", " : "ranks " + process * k + "-" + (process * k + k - 1) + ", ";
        return "process " + process + " (" + ranks + "host " + hosts[process] + ")";
    }

    /** For work beside the step: sets {@code key} (under "side/") for every process to read with {@link #await}. */
    public void publish(String key, byte[] value) {
        onStore(() -> {
            synchronized (background) {
                background.set("side/" + key, value);
            }
            return null;
        });
    }

    /**
     * For work beside the step: the value some process {@link #publish}ed under {@code key},
     * waiting up to {@code timeout}; fails (CommException) as soon as a process is found dead or
     * the run aborted. {@code what} says in messages what was awaited.
     */
    public byte[] await(String key, String what, Duration timeout) {
        return onStore(() -> {
            synchronized (background) {
                return awaitOn(background, "side/" + key, what, timeout);
            }
        });
    }

    /**
     * Runs a store call of the formed run: losing the store now means process 0 (which serves it)
     * ended or stalled, a failed rank (exit 7), not a rendezvous that could not form (exit 10).
     */
    private <T> T onStore(Supplier<T> call) {
        try {
            return call.get();
        } catch (StoreClient.TimeoutException e) {
            throw e;            // a key not set in time: the callers name what was awaited
        } catch (RendezvousException e) {
            if (identity.rank() == 0) {
                throw new CommException("the rendezvous store of this process stopped serving: " + e.getMessage(), e);
            }
            boolean silent = e.getCause() instanceof java.net.SocketTimeoutException;
            throw new CommException(silent ? describe(0) + ", which serves the rendezvous store, stopped answering ("
                    + e.getMessage() + ")" : "the rendezvous store is gone: " + describe(0) + ", which serves it, ended", e);
        }
    }

    private byte[] awaitOn(StoreClient client, String key, String what, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            try {
                return client.get(key, LIVENESS_POLL);
            } catch (StoreClient.TimeoutException e) {
                Optional<String> why = failure();
                if (why.isPresent()) {
                    throw new CommException(why.get() + ", while waiting for " + what);
                }
                if (System.nanoTime() > deadline) {
                    throw new CommException(what + " did not come within " + StoreClient.seconds(timeout)
                            + stalledSuffix());
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
        publishAbort(describe(identity.rank()) + " failed: " + reason);
        List<RankGroup> all;
        synchronized (this) {
            all = List.copyOf(groups);
        }
        all.forEach(RankGroup::close);
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
    public int processesOnThisMachine() {
        return identity.localCount();
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
            synchronized (aborts) {
                String standing = new String(aborts.compareSet("abort", new byte[0],
                        reason.getBytes(StandardCharsets.UTF_8)), StandardCharsets.UTF_8);
                if (standing.equals(reason)) {
                    aborts.set("abort/by", Integer.toString(identity.rank()));    // for rootFailure
                }
                return standing;
            }
        } catch (RuntimeException storeGone) {
            return reason;
        }
    }

    @Override
    public String hostOf(int process) {
        return hosts[process];
    }

    @Override
    public Optional<String> failure() {
        return failure(false);
    }

    /**
     * As {@link #failure()}, but naming the process at the root of it: when the store found a
     * process dead, that death, unless the abort reason was left by that very process (its own
     * reason, given before it ended). A survivor's abort over its lost connections to a killed
     * process is a consequence, so work beside the step (a checkpoint's commit) reports the death.
     */
    public Optional<String> rootFailure() {
        return failure(true);
    }

    private Optional<String> failure(boolean deathFirst) {
        try {
            synchronized (aborts) {
                String abort = aborts.check("abort") ? aborts.getString("abort", Duration.ZERO) : null;
                Integer dead = null;
                if (aborts.check("dead")) {
                    String who = aborts.getString("dead", Duration.ZERO);     // "process 1"
                    dead = Integer.parseInt(who.substring(who.lastIndexOf(' ') + 1));
                }
                boolean leftByTheDead = dead != null && aborts.check("abort/by")
                        && aborts.getString("abort/by", Duration.ZERO).equals(dead.toString());
                if (abort != null && (dead == null || !deathFirst || leftByTheDead)) {
                    return Optional.of(abort);
                }
                if (dead != null) {
                    return Optional.of(describe(dead) + " ended without a word (its connection to the store closed)");
                }
            }
            return Optional.empty();
        } catch (RuntimeException storeGone) {
            return identity.rank() == 0 ? Optional.empty()
                    : Optional.of("the rendezvous store is gone: " + describe(0) + ", which serves it, ended");
        }
    }

    @Override
    public List<Integer> stalledProcesses(Duration window) {
        try {
            long[] before = heartbeatCounts();
            Thread.sleep(window.toMillis());
            long[] after = heartbeatCounts();
            List<Integer> stalled = new ArrayList<>();
            for (int q = 0; q < before.length; q++) {
                if (q != identity.rank() && after[q] == before[q]) {
                    stalled.add(q);
                }
            }
            return stalled;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return List.of();
        } catch (RuntimeException storeGone) {
            return List.of();
        }
    }

    private long[] heartbeatCounts() {
        long[] counts = new long[identity.count()];
        synchronized (aborts) {
            for (int q = 0; q < counts.length; q++) {
                counts[q] = aborts.add("heartbeat/" + q, 0);
            }
        }
        return counts;
    }

    @Override
    public byte[] agreeOn(String key, Supplier<byte[]> make, Duration timeout) {
        String full = "agreed/" + key;
        if (identity.rank() == 0) {
            byte[] value = make.get();
            publishRaw(full, value);
            return value;
        }
        return onStore(() -> {
            synchronized (background) {
                return awaitOn(background, full, "'" + key + "' from " + describe(0), timeout);
            }
        });
    }

    private void publishRaw(String fullKey, byte[] value) {
        onStore(() -> {
            synchronized (background) {
                background.set(fullKey, value);
            }
            return null;
        });
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
        boolean clean = !failed && groups.stream().noneMatch(RankGroup::isAborted) && publishedAbort().isEmpty();
        try {
            if (clean) {
                control.delete(StoreServer.ALIVE + "process " + identity.rank());
                meetAll(control, "shutdown", "the end of the run", timeout);
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
            heartbeat.interrupt();
            groups.forEach(RankGroup::close);
            listener.close();
            control.close();
            aborts.close();
            background.close();
            heartbeats.close();
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
