// N ranks as N threads of one JVM: the in-process stand-in for NCCL that CI and laptops use, and
// the way several ranks share one GPU. Ranks exchange real data between their own buffers with
// backend ops, reduce in rank order 0..N−1 whatever the arrival order (bit-reproducible), and
// never wait longer than the timeout. How a collective meets the other ranks is the Dispatch
// (LocalCommunicator's file comment has the details).
package org.fsdp4j.comm;

import java.time.Duration;
import org.fsdp4j.backend.Backend;

public final class LocalGroup implements RankGroup {

    /** Where a collective's meetings run: inside the stream (CPU ranks), or on the host at issue time (any backend). */
    public enum Dispatch {
        /** A host function on the collective's stream does everything; needs CPU streams. */
        HOST_FUNCTIONS,
        /** The hosts meet when they issue; the streams are ordered by the events they trade. */
        STREAM_EVENTS
    }

    private final int size;
    private final Duration timeout;
    private final Dispatch dispatch;
    private final GroupFate fate = new GroupFate();
    private final Rendezvous world;

    /** A group whose collectives run as host functions on CPU streams. */
    public LocalGroup(int size, Duration timeout) {
        this(size, timeout, Dispatch.HOST_FUNCTIONS);
    }

    public LocalGroup(int size, Duration timeout, Dispatch dispatch) {
        if (size < 1) {
            throw new IllegalArgumentException("world size must be >= 1, got " + size);
        }
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("collective timeout must be > 0, got " + timeout);
        }
        this.size = size;
        this.timeout = timeout;
        this.dispatch = java.util.Objects.requireNonNull(dispatch, "dispatch");
        int[] ranks = new int[size];
        for (int i = 0; i < size; i++) {
            ranks[i] = i;
        }
        this.world = new Rendezvous("world", ranks, timeout, fate);
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    public Dispatch dispatch() {
        return dispatch;
    }

    /** Rank {@code rank}'s communicator over the whole group, moving data with {@code backend}. */
    @Override
    public Communicator communicator(int rank, Backend backend) {
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " is outside a group of " + size);
        }
        return new LocalCommunicator(world, rank, backend, dispatch);
    }

    /** Poisons the group because rank {@code rank} failed with {@code cause} (see Communicator.abort). */
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
}
