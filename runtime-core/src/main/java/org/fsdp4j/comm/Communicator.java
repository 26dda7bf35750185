// The collective-communication SPI the FSDP engine is written against, shaped as NCCL is: NCCL
// on GPUs, an in-process group of threads on the CPU (LocalGroup). One instance per (rank, group).
//
// Semantics shared by every implementation:
// - A collective is enqueued on the stream it is given and the call returns at once: it runs
//   after the work issued on that stream before it, and work issued on the stream after it runs
//   after it has completed on this rank. Nobody waits on the host; events order other streams.
// - Every rank issues the same collectives on a communicator in the same order (a mismatch is
//   detected and reported where the implementation can). One communicator serves one stream:
//   split() a communicator per stream that issues collectives (as NCCL needs for concurrency).
// - Buffers must be written, on the given stream or ordered before it by an event, before the
//   collective, and must not be reused before it has completed. Input and output have the same
//   dtype: half-precision data is what travels; reductions accumulate in fp32 and round once.
// - Every collective adds to counters() the bytes this rank sends and receives (CommOp's convention).
// - A failure (timeout, abort, mismatch) fails the stream: later work on it is skipped, its
//   events fail, and the CommException (naming the collective, the rank, and the rank that
//   caused it) reaches the host at its next synchronisation. The whole group is aborted first,
//   so no other rank waits for the timeout.
package org.fsdp4j.comm;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

public interface Communicator extends AutoCloseable {

    /** This rank's index in the group, 0 ≤ rank < size. */
    int rank();

    int size();

    /** The group's name for messages ("world", "world/shard[1]"). */
    String name();

    /** output (size · n) = the inputs (n) of ranks 0..size−1 end to end. input may be this rank's chunk of output. */
    void allGather(Tensor input, Tensor output, Backend.Stream stream);

    /** output (n) = reduction over ranks of chunk {@code rank} of input (size · n). Output must not overlap input. */
    void reduceScatter(Tensor input, Tensor output, Reduction reduction, Backend.Stream stream);

    /** buffer = reduction over ranks of buffer, in place. */
    void allReduce(Tensor buffer, Reduction reduction, Backend.Stream stream);

    /** buffer = root's buffer. */
    void broadcast(Tensor buffer, int root, Backend.Stream stream);

    /** Completes on {@code stream} once every rank's stream has reached it. */
    void barrier(Backend.Stream stream);

    /**
     * A new communicator over the ranks that pass the same {@code color}, ordered by (key, rank).
     * Collective over this group: every rank calls it, in the same order relative to the other
     * collectives. Blocks the host until the new group exists (set-up, not the step).
     */
    Communicator split(int color, int key, String name);

    /** Bytes sent and received by this rank on this communicator so far. */
    CommCounters counters();

    /**
     * Whether the ranks of this group can all hold one buffer ({@link #sharedBuffer}): in-process
     * CPU ranks (one address space), or CPU ranks in processes of one host that reach each other
     * through shared memory. False for NCCL groups and for in-process groups that dispatch on
     * stream events. An all-gather whose inputs are the chunks of such a buffer, given as its
     * output, then moves nothing: the ranks read each other's chunks in place once they have met.
     */
    default boolean sharesMemory() {
        return false;
    }

    /**
     * Collective set-up, only where {@link #sharesMemory()}: one buffer of {@code numel} elements
     * (a multiple of size()) that every rank of the group holds (at one address in one process),
     * charged to each rank's memory tracker in equal parts. Every rank calls it, in the same order
     * relative to the other collectives; it blocks the host until each rank has its handle. A rank
     * closes its handle once its own streams are done with the buffer; the last close frees it.
     * Returns null, on every rank alike, where the system would not give the memory to share
     * (a full /dev/shm across processes): the caller then keeps buffers of its own.
     */
    default SharedBuffer sharedBuffer(DType dtype, MemoryCategory category, long numel) {
        throw new UnsupportedOperationException("communicator '" + name() + "': its ranks cannot share memory, so they"
                + " cannot hold one buffer (check sharesMemory() first)");
    }

    /**
     * Poisons the whole group (and every group split from the same root) because of {@code cause}
     * on this rank: pending and future collectives on every rank fail promptly with an error naming
     * this rank. Idempotent; the first cause wins.
     */
    void abort(Throwable cause);

    /** Releases the communicator (its queued collectives still run). Idempotent. */
    @Override
    void close();
}
