// N ranks as N threads of one JVM: the in-process stand-in for NCCL that CI and laptops use.
// Ranks exchange real data between their own (CPU-backend) buffers, reduce in rank order
// 0..N−1 whatever the arrival order (bit-reproducible), and never wait longer than the timeout.
package org.fsdp4j.comm;

import java.time.Duration;
import org.fsdp4j.backend.Backend;

public final class LocalGroup {

    private final int size;
    private final Duration timeout;
    private final GroupFate fate = new GroupFate();
    private final Rendezvous world;

    public LocalGroup(int size, Duration timeout) {
        if (size < 1) {
            throw new IllegalArgumentException("world size must be >= 1, got " + size);
        }
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("collective timeout must be > 0, got " + timeout);
        }
        this.size = size;
        this.timeout = timeout;
        int[] ranks = new int[size];
        for (int i = 0; i < size; i++) {
            ranks[i] = i;
        }
        this.world = new Rendezvous("world", ranks, timeout, fate);
    }

    public int size() {
        return size;
    }

    public Duration timeout() {
        return timeout;
    }

    /** Rank {@code rank}'s communicator over the whole group, moving data with {@code backend}. */
    public Communicator communicator(int rank, Backend backend) {
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " is outside a group of " + size);
        }
        return new LocalCommunicator(world, rank, backend);
    }

    /** Poisons the group because rank {@code rank} failed with {@code cause} (see Communicator.abort). */
    public void abort(int rank, Throwable cause) {
        fate.abort(LocalCommunicator.rankFailure(rank, cause));
    }

    public boolean isAborted() {
        return fate.isAborted();
    }
}
