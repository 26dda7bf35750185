// The ranks of this process on different GPUs, talking through NCCL, as a whole job or as this
// process's share of a job spread over several processes and machines. One unique id per
// group: made here, or, across processes, made by process 0 and read by every process through
// the rendezvous store (ProcessDirectory.agreeOn). Each rank's communicator is made on its own
// thread with its GPU current, non-blocking (ncclCommInitRankConfig with blocking = 0), and polled
// until it is ready or the deadline passes, so a rank that never comes ends the wait instead of
// hanging it. A watchdog (NcclWatchdog) ends every hang after: a collective that does not complete
// within the timeout, an error NCCL reports asynchronously, a process that died or aborted. The
// first failure anywhere aborts every communicator of the group (ncclCommAbort), is left in the
// store for the other processes (which then abort theirs), and every later collective fails
// naming it; its message names the rank, its process and host, and the collective.
package org.fsdp4j.nccl;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.ProcessDirectory;
import org.fsdp4j.comm.RankGroup;

public final class NcclGroup implements RankGroup {

    /** How long a poll of a non-blocking call sleeps at most between looks. */
    private static final long POLL_MAX_MILLIS = 10;
    /** How often a wait for NCCL looks at the store for a failed process. */
    private static final long LIVENESS_MILLIS = 1000;

    private final NcclApi nccl;
    private final int worldSize;
    private final int firstRank;
    private final int size;
    private final Duration timeout;
    private final ProcessDirectory directory;     // null: every rank runs in this process
    private final byte[] uniqueId;
    private final Function<Backend, NcclDevice> devices;
    private final IssueOrder.Rule issueRule;
    private final NcclWatchdog watchdog;
    private final List<NcclCommunicator> live = new ArrayList<>();
    private volatile CommException abortCause;
    private volatile boolean closed;

    NcclGroup(NcclApi nccl, int size, Duration timeout, Function<Backend, NcclDevice> devices) {
        this(nccl, size, 0, size, timeout, null, null, devices);
    }

    NcclGroup(NcclApi nccl, int worldSize, int firstRank, int size, Duration timeout, ProcessDirectory directory,
              String key, Function<Backend, NcclDevice> devices) {
        if (size < 1 || worldSize < size || firstRank < 0 || firstRank + size > worldSize) {
            throw new IllegalArgumentException("ranks " + firstRank + ".." + (firstRank + size - 1) + " of a world of "
                    + worldSize + " do not fit");
        }
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("collective timeout must be > 0, got " + timeout);
        }
        this.nccl = nccl;
        this.worldSize = worldSize;
        this.firstRank = firstRank;
        this.size = size;
        this.timeout = timeout;
        this.directory = directory;
        this.devices = devices;
        this.issueRule = IssueOrder.rule(nccl);
        this.uniqueId = directory == null ? newUniqueId(nccl)
                : directory.agreeOn("nccl/" + key + "/unique-id", () -> newUniqueId(nccl), timeout);
        if (uniqueId.length != NativeNccl.UNIQUE_ID_BYTES) {
            throw new CommException("the NCCL unique id from process 0 has " + uniqueId.length + " bytes, not "
                    + NativeNccl.UNIQUE_ID_BYTES);
        }
        this.watchdog = new NcclWatchdog(this, directory, timeout);
    }

    private static byte[] newUniqueId(NcclApi nccl) {
        byte[] id = new byte[NativeNccl.UNIQUE_ID_BYTES];
        int rc = nccl.uniqueId(id);
        if (rc != NcclApi.SUCCESS) {
            throw new CommException("ncclGetUniqueId failed: " + nccl.errorString(rc));
        }
        return id;
    }

    /** {@code size} ranks of this process, rank r on its own GPU (the real NCCL). */
    public static NcclGroup create(int size, Duration timeout) {
        return new NcclGroup(new NativeNccl(), size, timeout, CudaNcclDevice::new);
    }

    /**
     * This process's {@code size} ranks (from {@code firstRank}) of a world of {@code worldSize}
     * spread over the processes of {@code directory}, meeting under {@code key} (the real NCCL).
     */
    public static NcclGroup acrossProcesses(int worldSize, int firstRank, int size, ProcessDirectory directory,
                                            String key, Duration timeout) {
        return new NcclGroup(new NativeNccl(), worldSize, firstRank, size, timeout, directory, key,
                CudaNcclDevice::new);
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public int worldSize() {
        return worldSize;
    }

    @Override
    public int firstRank() {
        return firstRank;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    @Override
    public String transport() {
        return "NCCL, collectives " + (issueRule == IssueOrder.Rule.IMPLICIT ? "in " : "") + issueRule.describe();
    }

    /**
     * ncclCommInitRankConfig (non-blocking) for global rank {@code rank} on {@code backend}'s GPU;
     * returns once every rank has joined. Fails (and aborts the group) when NCCL refuses, when a
     * process is found dead or the run aborted, or after the timeout.
     */
    @Override
    public Communicator communicator(int rank, Backend backend) {
        if (rank < firstRank || rank >= firstRank + size) {
            throw new IllegalArgumentException("rank " + rank + " does not run in this process (it runs ranks "
                    + firstRank + ".." + (firstRank + size - 1) + ")");
        }
        checkNotAborted("joining the NCCL group at " + describeRank(rank));
        NcclDevice device = devices.apply(backend);
        device.makeCurrent();
        long[] comm = new long[1];
        String where = "ncclCommInitRank of 'world' at " + describeRank(rank) + " on " + device.name();
        int rc = nccl.commInitRank(comm, worldSize, uniqueId.clone(), rank, false);
        if (comm[0] != 0 && (rc == NcclApi.IN_PROGRESS || rc == NcclApi.SUCCESS)) {
            rc = awaitReady(comm[0], where);                // the communicator is made in the background
        }
        if (rc != NcclApi.SUCCESS) {
            if (comm[0] != 0) {
                nccl.commAbort(comm[0]);
            }
            CommException e = new CommException(where + " failed: " + nccl.errorString(rc) + lastError(comm[0]));
            abort(rank, e);
            throw e;
        }
        return new NcclCommunicator(nccl, this, device, new IssueOrder(issueRule), comm[0], "world", rank, worldSize,
                rank);
    }

    /**
     * Polls a non-blocking communicator until its last call (its creation, a split, a collective)
     * has finished: NCCL's result then (SUCCESS or the failure). While it waits, it looks at the
     * store once a second for a process that died or aborted; past the timeout it gives up with a
     * CommException naming the processes whose heartbeat stopped.
     */
    int awaitReady(long comm, String where) {
        long start = System.nanoTime();
        long deadline = start + timeout.toNanos();
        long nextLook = start + LIVENESS_MILLIS * 1_000_000L;
        long sleep = 1;
        int[] err = new int[1];
        while (true) {
            int rc = nccl.commGetAsyncError(comm, err);
            int state = rc != NcclApi.SUCCESS ? rc : err[0];
            if (state != NcclApi.IN_PROGRESS) {
                return state;
            }
            CommException aborted = abortCause;
            if (aborted != null) {
                nccl.commAbort(comm);
                throw new CommException(where + ": group aborted: " + aborted.getMessage(), aborted);
            }
            long now = System.nanoTime();
            if (directory != null && now > nextLook) {
                nextLook = now + LIVENESS_MILLIS * 1_000_000L;
                String why = directory.failure().orElse(null);
                if (why != null) {
                    nccl.commAbort(comm);
                    throw new CommException(why + ", while " + where + " waited for it");
                }
            }
            if (now > deadline) {
                nccl.commAbort(comm);
                throw new CommException(where + " did not complete within " + seconds(timeout) + stalled());
            }
            try {
                Thread.sleep(sleep);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                nccl.commAbort(comm);
                throw new CommException(where + ": interrupted");
            }
            sleep = Math.min(POLL_MAX_MILLIS, sleep * 2);
        }
    }

    /** ": process 1 (ranks 2-3, host h) stopped answering (no heartbeat for 2 s)", or "" (in one process, or all beat). */
    String stalled() {
        return directory == null ? "" : directory.stalledSuffix();
    }

    /** "rank 2 (process 1, host node7)" across processes, "rank 2" in one. */
    String describeRank(int rank) {
        return directory == null ? "rank " + rank : directory.describeRank(rank, size);
    }

    private String lastError(long comm) {
        if (comm == 0) {
            return "";
        }
        String last = nccl.lastError(comm);
        return last == null || last.isBlank() ? "" : " (NCCL: " + last.strip() + ")";
    }

    static String seconds(Duration d) {
        return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : String.format("%.1f s", d.toMillis() / 1e3);
    }

    @Override
    public void abort(int rank, Throwable cause) {
        CommException why = cause instanceof CommException ce && ce.getMessage() != null
                && ce.getMessage().startsWith("rank ") ? ce
                : new CommException(describeRank(rank) + " failed: " + describe(cause), cause);
        abortWith(why, true);
    }

    /**
     * Aborts every communicator of this process once, with {@code why}; across processes, leaves
     * the reason in the store first (the reason that stands, another process's if it was first,
     * becomes this group's cause, so that every process reports the same). {@code publish} false:
     * the reason came from the store.
     */
    void abortWith(CommException why, boolean publish) {
        List<NcclCommunicator> all;
        synchronized (this) {
            if (abortCause != null) {
                return;
            }
            CommException standing = why;
            if (publish && directory != null) {
                String first = directory.publishAbort(why.getMessage());
                if (!first.equals(why.getMessage())) {
                    standing = new CommException(first, why);
                }
            }
            abortCause = standing;
            all = new ArrayList<>(live);
        }
        for (NcclCommunicator c : all) {
            c.abortNative();
        }
        watchdog.aborted(abortCause);
    }

    @Override
    public boolean isAborted() {
        return abortCause != null;
    }

    @Override
    public CommException abortCause() {
        return abortCause;
    }

    void checkNotAborted(String where) {
        CommException c = abortCause;
        if (c != null) {
            throw new CommException(where + ": group aborted: " + c.getMessage(), c);
        }
    }

    synchronized void register(NcclCommunicator c) {
        live.add(c);
        if (abortCause != null) {
            c.abortNative();
        } else {
            watchdog.watch(c);
        }
    }

    synchronized void forget(NcclCommunicator c) {
        live.remove(c);
        watchdog.unwatch(c);
    }

    /** The communicators still open (the watchdog's view). */
    synchronized List<NcclCommunicator> live() {
        return List.copyOf(live);
    }

    NcclWatchdog watchdog() {
        return watchdog;
    }

    /**
     * This process leaves the group: a communicator still open (the run failed before closing it)
     * is aborted, so that the other processes' collectives end; the watchdog stops. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        List<NcclCommunicator> left = live();
        if (!left.isEmpty() && abortCause == null) {
            abortWith(new CommException("the process of " + describeRank(firstRank) + " left the NCCL group with "
                    + left.size() + " communicator(s) still open"), true);
        }
        watchdog.stop();
    }

    private static String describe(Throwable t) {
        return t instanceof CommException ? t.getMessage() : t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    @Override
    public String toString() {
        return "NcclGroup(" + size + " of " + worldSize + " ranks from " + firstRank + ", " + issueRule.describe() + ")";
    }
}
