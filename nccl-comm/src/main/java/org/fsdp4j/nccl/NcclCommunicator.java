// One rank's NCCL communicator: the stream-aware Communicator SPI on NCCL. A collective is
// queued on the CUDA stream it is given (NCCL's own model) and the call returns; fp32 and bf16
// averages use ncclAvg, fp16's divided sum scales its input before ncclSum and its output after
// (so the fp16 sum stays in range, as FSDP2 does: the input is consumed). Every NCCL return
// code is checked: a failure aborts every communicator of the group (ncclCommAbort, so no rank is
// left blocked) and throws a CommException naming the operation, the group, the rank, NCCL's
// error string and its last-error text. Bytes are counted as the in-process group counts them.
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
    private final long comm;
    private final String name;
    private final int rank;
    private final int size;
    private final int globalRank;
    private final CommCounters counters = new CommCounters();
    private final AtomicLong issued = new AtomicLong();
    private volatile boolean closed;
    private volatile boolean aborted;     // ncclCommAbort has freed it: never destroy it as well

    NcclCommunicator(NcclApi nccl, NcclGroup group, NcclDevice device, long comm, String name, int rank, int size,
                     int globalRank) {
        this.nccl = nccl;
        this.group = group;
        this.device = device;
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
        check(nccl.allGather(send, device.address(output), input.numel(), input.dtype(), comm, device.stream(stream)),
                where);
        record(CommOp.ALL_GATHER, output.numBytes(), 0);
    }

    @Override
    public void reduceScatter(Tensor input, Tensor output, Reduction reduction, Backend.Stream stream) {
        CollectiveChecks.reduceScatter(name, size, input, output);
        String where = begin(CommOp.REDUCE_SCATTER);
        long s = device.stream(stream);
        preDivide(input, reduction, stream);
        check(nccl.reduceScatter(device.address(input), device.address(output), output.numel(), input.dtype(),
                op(reduction), comm, s), where);
        postDivide(output, reduction, stream);
        record(CommOp.REDUCE_SCATTER, input.numBytes(), 0);
    }

    @Override
    public void allReduce(Tensor buffer, Reduction reduction, Backend.Stream stream) {
        CollectiveChecks.allReduce(name, buffer);
        String where = begin(CommOp.ALL_REDUCE);
        long s = device.stream(stream);
        preDivide(buffer, reduction, stream);
        long at = device.address(buffer);
        check(nccl.allReduce(at, at, buffer.numel(), buffer.dtype(), op(reduction), comm, s), where);
        postDivide(buffer, reduction, stream);
        record(CommOp.ALL_REDUCE, buffer.numBytes(), 0);
    }

    @Override
    public void broadcast(Tensor buffer, int root, Backend.Stream stream) {
        CollectiveChecks.broadcast(name, size, root);
        String where = begin(CommOp.BROADCAST);
        long at = device.address(buffer);
        check(nccl.broadcast(at, at, buffer.numel(), buffer.dtype(), root, comm, device.stream(stream)), where);
        record(CommOp.BROADCAST, buffer.numBytes(), root);
    }

    /** NCCL has no barrier: an all-reduce of one element is a collective every rank's stream must reach. */
    @Override
    public void barrier(Backend.Stream stream) {
        String where = begin(CommOp.BARRIER);
        long at = device.scratch();
        check(nccl.allReduce(at, at, 1, DType.F32, NcclApi.OP_SUM, comm, device.stream(stream)), where);
    }

    /** ncclCommSplit: collective over this communicator; blocks until the new one exists. */
    @Override
    public Communicator split(int color, int key, String subName) {
        String where = begin(CommOp.SPLIT);
        device.makeCurrent();
        long[] out = new long[1];
        check(nccl.commSplit(comm, color, key, out), where);
        int[] newRank = new int[1];
        int[] newSize = new int[1];
        check(nccl.commUserRank(out[0], newRank), where + " (rank in the new group)");
        check(nccl.commCount(out[0], newSize), where + " (size of the new group)");
        return new NcclCommunicator(nccl, group, device.sibling(), out[0], name + "/" + subName, newRank[0], newSize[0],
                globalRank);
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

    /** The asynchronous error NCCL holds for this communicator (a network failure mid-collective), or null. */
    String asyncError() {
        int[] err = new int[1];
        int rc = nccl.commGetAsyncError(comm, err);
        int e = rc != NcclApi.SUCCESS ? rc : err[0];
        return e == NcclApi.SUCCESS ? null : nccl.errorString(e) + describeLast();
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
        int rc = nccl.commDestroy(comm);
        if (rc != NcclApi.SUCCESS) {
            throw new CommException("ncclCommDestroy of '" + name + "' at rank " + globalRank + " on " + device.name()
                    + ": " + nccl.errorString(rc));
        }
    }

    // ------------------------------------------------------------------ machinery

    private String begin(CommOp op) {
        group.checkNotAborted(op.label() + " on '" + name + "' at rank " + globalRank);
        if (closed) {
            throw new IllegalStateException("NCCL communicator '" + name + "' at rank " + globalRank + " is closed");
        }
        return op.label() + " #" + issued.incrementAndGet() + " on '" + name + "' at rank " + globalRank + " ("
                + device.name() + ")";
    }

    /** Throws (after aborting the whole group) unless NCCL returned success. */
    private void check(int result, String where) {
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
