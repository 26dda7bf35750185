// One rank's NCCL communicator: the stream-aware Communicator SPI on NCCL. A collective is
// queued on the CUDA stream it is given (NCCL's own model) and the call returns; fp32 and bf16
// averages use ncclAvg, fp16's divided sum scales its input before ncclSum and its output after
// (so the fp16 sum stays in range, as FSDP2 does: the input is consumed). Communicators are
// non-blocking (a call that answers ncclInProgress is polled to its end). Each collective keeps
// the rank's issue order on the GPU (IssueOrder) and records an event after itself for the
// group's watchdog, which fails it if it does not complete in time. Every NCCL return code is
// checked: a failure aborts every communicator of the group (ncclCommAbort, so no rank is left
// blocked) and throws a CommException naming the operation, the group, the rank, NCCL's error
// string and its last-error text. Bytes are counted as the in-process group counts them.
package org.fsdp4j.nccl;

import java.util.concurrent.atomic.AtomicLong;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CollectiveChecks;
import org.fsdp4j.comm.CommCounters;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.CommOp;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.Reduction;

final class NcclCommunicator implements Communicator {

    private final NcclApi nccl;
    private final NcclGroup group;        // aborts every communicator of the job on a failure
    private final NcclDevice device;
    private final IssueOrder order;       // the rank's, shared by every communicator it splits
    private final long comm;
    private final String name;
    private final int rank;
    private final int size;
    private final int globalRank;
    private final CommCounters counters = new CommCounters();
    private final AtomicLong issued = new AtomicLong();
    private volatile boolean closed;
    private volatile boolean aborted;     // ncclCommAbort has freed it: never destroy it as well

    NcclCommunicator(NcclApi nccl, NcclGroup group, NcclDevice device, IssueOrder order, long comm, String name,
                     int rank, int size, int globalRank) {
        this.nccl = nccl;
        this.group = group;
        this.device = device;
        this.order = order;
        this.comm = comm;
        this.name = name;
        this.rank = rank;
        this.size = size;
        this.globalRank = globalRank;
        group.register(this);
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public CommCounters counters() {
        return counters;
    }

    long handle() {
        return comm;
    }

    // ------------------------------------------------------------------ collectives

    @Override
    public void allGather(Tensor input, Tensor output, Backend.Stream stream) {
        boolean inPlace = CollectiveChecks.allGather(name, size, rank, input, output);
        String where = begin(CommOp.ALL_GATHER);
        long send = inPlace ? device.address(output) + rank * input.numBytes() : device.address(input);
        order.before(stream);
        check(nccl.allGather(send, device.address(output), input.numel(), input.dtype(), comm, device.stream(stream)),
                where);
        issued(where, stream);
        record(CommOp.ALL_GATHER, output.numBytes(), 0);
    }

    @Override
    public void reduceScatter(Tensor input, Tensor output, Reduction reduction, Backend.Stream stream) {
        CollectiveChecks.reduceScatter(name, size, input, output);
        String where = begin(CommOp.REDUCE_SCATTER);
        long s = device.stream(stream);
        order.before(stream);
        preDivide(input, reduction, stream);
        check(nccl.reduceScatter(device.address(input), device.address(output), output.numel(), input.dtype(),
                op(reduction), comm, s), where);
        issued(where, stream);
        postDivide(output, reduction, stream);
        record(CommOp.REDUCE_SCATTER, input.numBytes(), 0);
    }

    @Override
    public void allReduce(Tensor buffer, Reduction reduction, Backend.Stream stream) {
        CollectiveChecks.allReduce(name, buffer);
        String where = begin(CommOp.ALL_REDUCE);
        long s = device.stream(stream);
        order.before(stream);
        preDivide(buffer, reduction, stream);
        long at = device.address(buffer);
        check(nccl.allReduce(at, at, buffer.numel(), buffer.dtype(), op(reduction), comm, s), where);
        issued(where, stream);
        postDivide(buffer, reduction, stream);
        record(CommOp.ALL_REDUCE, buffer.numBytes(), 0);
    }

    @Override
    public void broadcast(Tensor buffer, int root, Backend.Stream stream) {
        CollectiveChecks.broadcast(name, size, root);
        String where = begin(CommOp.BROADCAST);
        long at = device.address(buffer);
        order.before(stream);
        check(nccl.broadcast(at, at, buffer.numel(), buffer.dtype(), root, comm, device.stream(stream)), where);
        issued(where, stream);
        record(CommOp.BROADCAST, buffer.numBytes(), root);
    }

    /** NCCL has no barrier: an all-reduce of one element is a collective every rank's stream must reach. */
    @Override
    public void barrier(Backend.Stream stream) {
        String where = begin(CommOp.BARRIER);
        long at = device.scratch();
        order.before(stream);
        check(nccl.allReduce(at, at, 1, DType.F32, NcclApi.OP_SUM, comm, device.stream(stream)), where);
        issued(where, stream);
    }

    /** ncclCommSplit (non-blocking, polled): collective over this communicator; returns once the new one exists. */
    @Override
    public Communicator split(int color, int key, String subName) {
        String where = begin(CommOp.SPLIT);
        device.makeCurrent();
        long[] out = new long[1];
        int rc = nccl.commSplit(comm, color, key, out, false);
        if (out[0] != 0 && (rc == NcclApi.IN_PROGRESS || rc == NcclApi.SUCCESS)) {
            rc = group.awaitReady(out[0], where);          // the new communicator is made in the background
        }
        check(rc, where);
        int[] newRank = new int[1];
        int[] newSize = new int[1];
        check(nccl.commUserRank(out[0], newRank), where + " (rank in the new group)");
        check(nccl.commCount(out[0], newSize), where + " (size of the new group)");
        return new NcclCommunicator(nccl, group, device.sibling(), order, out[0], name + "/" + subName, newRank[0],
                newSize[0], globalRank);
    }

    // ------------------------------------------------------------------ failures and teardown

    @Override
    public void abort(Throwable cause) {
        group.abort(globalRank, cause);
    }

    /** ncclCommAbort on this communicator (the group calls it on each of its communicators). */
    synchronized void abortNative() {
        if (!closed && !aborted) {
            aborted = true;
            nccl.commAbort(comm);   // its own failure cannot be reported: the group is going down anyway
        }
    }

    /**
     * The asynchronous error NCCL holds for this communicator (a remote process that exited, a
     * network failure mid-collective), or null (none, or a call still in progress).
     */
    String asyncError() {
        if (closed || aborted) {
            return null;
        }
        int[] err = new int[1];
        int rc = nccl.commGetAsyncError(comm, err);
        int e = rc != NcclApi.SUCCESS ? rc : err[0];
        return e == NcclApi.SUCCESS || e == NcclApi.IN_PROGRESS ? null : "'" + nccl.errorString(e) + "'" + describeLast();
    }

    /** "'world/shard[0]' at rank 2 (process 1, host h) (cuda:0)": how messages name this communicator. */
    String describe() {
        return "'" + name + "' at " + group.describeRank(globalRank) + " (" + device.name() + ")";
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        group.forget(this);
        device.close();
        if (aborted) {
            return;
        }
        int rc = nccl.commFinalize(comm);           // flushes its queued work; non-blocking: polled
        if (rc == NcclApi.IN_PROGRESS) {
            rc = group.awaitReady(comm, "ncclCommFinalize of " + describe());
        }
        if (rc != NcclApi.SUCCESS) {
            nccl.commAbort(comm);
            throw new CommException("ncclCommFinalize of '" + name + "' at rank " + globalRank + " on " + device.name()
                    + ": " + nccl.errorString(rc));
        }
        rc = nccl.commDestroy(comm);
        if (rc != NcclApi.SUCCESS) {
            throw new CommException("ncclCommDestroy of '" + name + "' at rank " + globalRank + " on " + device.name()
                    + ": " + nccl.errorString(rc));
        }
    }

    // ------------------------------------------------------------------ machinery

    private String begin(CommOp op) {
        group.checkNotAborted(op.label() + " on '" + name + "' at " + group.describeRank(globalRank));
        if (closed) {
            throw new IllegalStateException("NCCL communicator '" + name + "' at rank " + globalRank + " is closed");
        }
        return op.label() + " #" + issued.incrementAndGet() + " on '" + name + "' at " + group.describeRank(globalRank)
                + " (" + device.name() + ")";
    }

    /** After a collective was queued on {@code stream}: the rank's issue order and the watchdog hear of it. */
    private void issued(String where, Backend.Stream stream) {
        Backend.Event done = stream.record();
        order.after(done);
        group.watchdog().issued(this, where, done);
    }

    /**
     * Throws (after aborting the whole group) unless NCCL returned success; a non-blocking call
     * that answered ncclInProgress is polled to its end first.
     */
    private void check(int result, String where) {
        if (result == NcclApi.IN_PROGRESS) {
            result = group.awaitReady(comm, where);
        }
        if (result == NcclApi.SUCCESS) {
            return;
        }
        CommException e = new CommException(where + " failed: " + nccl.errorString(result) + describeLast());
        group.abort(globalRank, e);
        throw e;
    }

    private String describeLast() {
        String last = nccl.lastError(comm);
        return last == null || last.isBlank() ? "" : " (NCCL: " + last.strip() + ")";
    }

    private static int op(Reduction r) {
        return r.kind() == Reduction.Kind.AVG ? NcclApi.OP_AVG : NcclApi.OP_SUM;
    }

    /** fp16's divided sum: scale the input first, so the sum NCCL takes in the buffer's dtype stays in range. */
    private void preDivide(Tensor t, Reduction r, Backend.Stream stream) {
        if (r.kind() == Reduction.Kind.SUM && r.preDivide() != 1) {
            device.scale(t, (float) (1 / r.preDivide()), stream);
        }
    }

    private void postDivide(Tensor t, Reduction r, Backend.Stream stream) {
        if (r.kind() == Reduction.Kind.SUM && r.postDivide() != 1) {
            device.scale(t, (float) (1 / r.postDivide()), stream);
        }
    }

    /** Counts the bytes when the collective is issued, with CommOp's ring convention. */
    private void record(CommOp op, long fullBytes, int root) {
        counters.record(op, op.sentBytes(fullBytes, size, rank, root), op.receivedBytes(fullBytes, size, rank, root));
    }

    @Override
    public String toString() {
        return "NCCL communicator '" + name + "' rank " + rank + "/" + size + " on " + device.name();
    }
}
