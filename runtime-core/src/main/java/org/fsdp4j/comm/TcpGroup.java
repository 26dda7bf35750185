// A world of N ranks spread over P processes, K = N / P consecutive ranks in each (process p runs
// ranks pK .. pK+K−1 as threads), connected over TCP, with shared-memory rings carrying the bytes
// between processes of one host: the CPU backend's communicator beyond one process. Within a
// process the ranks meet as the in-process group's do; across processes each
// pair of ranks has a connection per communicator (TcpCommunicator). One abort state serves the
// world and every group split from it: the first failure anywhere in this process leaves its
// reason in the rendezvous store, then closes every connection, so that the other processes
// stop at once, and with the same reason.
package org.fsdp4j.comm;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.fsdp4j.backend.Backend;

public final class TcpGroup implements RankGroup, AutoCloseable {

    private final String key;
    private final int worldSize;
    private final int perProcess;
    private final ProcessDirectory directory;
    private final Duration timeout;
    private final GroupFate fate = new GroupFate();
    private volatile boolean sharedMemory = sharedMemoryByDefault();
    private final List<TcpCommunicator> communicators = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    /**
     * The share of this process (directory.process()) in a world of {@code worldSize} ranks.
     * {@code key} names the group in every process alike (the connections carry it).
     */
    public TcpGroup(String key, int worldSize, ProcessDirectory directory, Duration timeout) {
        int processes = directory.processCount();
        if (worldSize < processes || worldSize % processes != 0) {
            throw new IllegalArgumentException("--world-size " + worldSize + " does not split over " + processes
                    + " processes: use a multiple of " + processes + " (each process runs the same number of ranks)");
        }
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("collective timeout must be > 0, got " + timeout);
        }
        this.key = key;
        this.worldSize = worldSize;
        this.perProcess = worldSize / processes;
        this.directory = directory;
        this.timeout = timeout;
        fate.onAbort(this::aborted);
    }

    @Override
    public int size() {
        return perProcess;
    }

    @Override
    public int worldSize() {
        return worldSize;
    }

    @Override
    public int firstRank() {
        return directory.process() * perProcess;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    @Override
    public Communicator communicator(int rank, Backend backend) {
        if (rank < firstRank() || rank >= firstRank() + perProcess) {
            throw new IllegalArgumentException("rank " + rank + " does not run in process " + directory.process()
                    + " (it runs ranks " + firstRank() + ".." + (firstRank() + perProcess - 1) + ")");
        }
        if (!backend.device().isCpu()) {
            throw new IllegalArgumentException("ranks in several processes talk over TCP from the CPU backend; "
                    + backend.device() + " across processes needs NCCL's own bootstrap, which fsdp4j does not have yet:"
                    + " use --device cpu, or run all GPUs of one node in one process");
        }
        int[] all = new int[worldSize];
        for (int r = 0; r < worldSize; r++) {
            all[r] = r;
        }
        return new TcpCommunicator(this, key + "/world", "world", all, rank, backend);
    }

    @Override
    public void abort(int rank, Throwable cause) {
        fate.abort(HostCommunicator.rankFailure(rank, cause));
    }

    @Override
    public boolean isAborted() {
        return fate.isAborted();
    }

    @Override
    public CommException abortCause() {
        return fate.cause();
    }

    /** Whether groups let processes of one host use shared memory unless told otherwise: yes, unless -Dfsdp4j.sharedMemory=false. */
    public static boolean sharedMemoryByDefault() {
        return Fsdp4jSystemProperties.sharedMemory();
    }

    /**
     * Whether communicators made from now on may carry the bytes between two processes of this
     * host through shared-memory rings (default: yes, unless -Dfsdp4j.sharedMemory=false); a
     * pair uses them only where both sides allow it, else TCP.
     */
    void sharedMemory(boolean allowed) {
        this.sharedMemory = allowed;
    }

    // ------------------------------------------------------------------ for TcpCommunicator

    boolean sharedMemory() {
        return sharedMemory;
    }

    GroupFate fate() {
        return fate;
    }

    int processOf(int rank) {
        return rank / perProcess;
    }

    boolean isLocal(int rank) {
        return processOf(rank) == directory.process();
    }

    /** "rank 2 (process 1, host node7)": how messages name a rank. */
    String describe(int rank) {
        return directory.describeRank(rank, perProcess);
    }

    /** The connection for communicator {@code commKey} between rank {@code from} (here) and {@code to}: opened by the lower rank. */
    SocketChannel connect(String commKey, int from, int to) {
        if (from < to) {
            return directory.listener().connect(directory.addressOf(processOf(to), timeout), commKey, from, to, timeout);
        }
        long[] lastLook = {System.nanoTime()};
        return directory.listener().await(commKey, to, from, timeout, () -> {
            if (fate.isAborted()) {
                return true;
            }
            if (System.nanoTime() - lastLook[0] < 1_000_000_000L) {
                return false;
            }
            lastLook[0] = System.nanoTime();       // a process that failed or died before it connected: the store tells
            return directory.failure().map(r -> {
                fate.abort(new CommException(r));
                return true;
            }).orElse(false);
        });
    }

    void register(TcpCommunicator c) {
        communicators.add(c);
        if (closed || fate.isAborted()) {
            c.closeLinks();
        }
    }

    void unregister(TcpCommunicator c) {
        communicators.remove(c);
    }

    /**
     * Why {@code where} failed with {@code e} when another process failed first and left its
     * reason in the store (ProcessGroup.fail, before its ranks connected: it closes its listener
     * after); empty when none did.
     */
    java.util.Optional<CommException> abortedElsewhere(String where, Exception e) {
        return directory.publishedAbort().map(r -> new CommException(where + ": the run was aborted: " + r, e));
    }

    /** Why the run cannot go on as the store tells it, waiting up to {@code wait} for it to learn of a death. */
    java.util.Optional<String> failureInStore(Duration wait) {
        return directory.failureWithin(wait);
    }

    /** A peer's connection ended: the reason its process left in the store if it left one, else the lost connection. */
    CommException lostPeer(String where, PeerLinks.LostPeerException e) {
        return abortedElsewhere(where, e).orElseGet(() -> new CommException(e.getMessage(), e));
    }

    /** The group was aborted (here): leave the reason for the other processes, then close every connection. */
    private void aborted() {
        CommException cause = fate.cause();
        if (cause != null && !closed) {
            directory.publishAbort(cause.getMessage());
        }
        for (TcpCommunicator c : communicators) {
            c.closeLinks();
        }
    }

    /** Closes every connection of the group's communicators. Idempotent. */
    @Override
    public void close() {
        closed = true;
        for (TcpCommunicator c : communicators) {
            c.closeLinks();
        }
        communicators.clear();
    }

    @Override
    public String toString() {
        return "TcpGroup(" + key + ": " + worldSize + " ranks, " + perProcess + " in each of " + directory.processCount()
                + " processes; this is process " + directory.process() + ")";
    }
}
