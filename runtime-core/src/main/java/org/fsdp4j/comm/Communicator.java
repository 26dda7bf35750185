// The collective-communication SPI the FSDP engine is written against: NCCL on GPUs, an
// in-process group of threads on the CPU (LocalGroup). One instance per (rank, group).
//
// Semantics shared by every implementation:
// - Every collective is asynchronous: it is queued on this communicator's stream and returns a
//   handle. Calls on one communicator execute in the order they were issued, so every rank must
//   issue the same collectives in the same order (a mismatch is detected and reported where the
//   implementation can). Use split() to get an independent stream over the same ranks.
// - Buffers must be ready when the call is made and must not be touched until the handle
//   completes. Input and output have the same dtype: half-precision data is what travels;
//   reductions accumulate in fp32 and round once to the buffer's dtype.
// - Every call adds to counters() the bytes this rank sends and receives (CommOp's convention).
// - A failure (timeout, abort, mismatch) surfaces as CommException from the handle's await().
package org.fsdp4j.comm;

import org.fsdp4j.tensor.Tensor;

public interface Communicator extends AutoCloseable {

    /** This rank's index in the group, 0 ≤ rank < size. */
    int rank();

    int size();

    /** The group's name for messages ("world", "world/shard[1]"). */
    String name();

    /** output (size · n) = the inputs (n) of ranks 0..size−1 end to end. input may be this rank's chunk of output. */
    CommHandle allGather(Tensor input, Tensor output);

    /** output (n) = reduction over ranks of chunk {@code rank} of input (size · n). Output must not overlap input. */
    CommHandle reduceScatter(Tensor input, Tensor output, Reduction reduction);

    /** buffer = reduction over ranks of buffer, in place. */
    CommHandle allReduce(Tensor buffer, Reduction reduction);

    /** buffer = root's buffer. */
    CommHandle broadcast(Tensor buffer, int root);

    /** Completes once every rank has reached it. */
    CommHandle barrier();

    /**
     * A new communicator over the ranks that pass the same {@code color}, ordered by (key, rank),
     * with its own stream. Collective over this group: every rank calls it, in the same order
     * relative to other calls. Blocks until the new group exists.
     */
    Communicator split(int color, int key, String name);

    /** Bytes sent and received by this rank on this communicator so far. */
    CommCounters counters();

    /**
     * Poisons the whole group (and every group split from the same root) because of {@code cause}
     * on this rank: pending and future collectives on every rank fail promptly with an error naming
     * this rank. Idempotent; the first cause wins.
     */
    void abort(Throwable cause);

    /** Waits for queued work and stops this communicator's stream. Idempotent. */
    @Override
    void close();
}
