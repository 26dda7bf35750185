// A communicator that passes everything to another one, with every collective routed through
// one method a decorator overrides (to delay it, record it, ...). LatencyCommunicator and the
// tests' recording communicators are written on it, so each says only what it changes.
package org.fsdp4j.comm;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

public abstract class ForwardingCommunicator implements Communicator {

    protected final Communicator inner;

    protected ForwardingCommunicator(Communicator inner) {
        this.inner = inner;
    }

    /** Every collective comes through here: {@code call} issues it on the inner communicator, on {@code stream}. */
    protected void collective(CommOp op, Backend.Stream stream, Runnable call) {
        call.run();
    }

    @Override
    public int rank() {
        return inner.rank();
    }

    @Override
    public int size() {
        return inner.size();
    }

    @Override
    public String name() {
        return inner.name();
    }

    @Override
    public void allGather(Tensor input, Tensor output, Backend.Stream stream) {
        collective(CommOp.ALL_GATHER, stream, () -> inner.allGather(input, output, stream));
    }

    @Override
    public void reduceScatter(Tensor input, Tensor output, Reduction reduction, Backend.Stream stream) {
        collective(CommOp.REDUCE_SCATTER, stream, () -> inner.reduceScatter(input, output, reduction, stream));
    }

    @Override
    public void allReduce(Tensor buffer, Reduction reduction, Backend.Stream stream) {
        collective(CommOp.ALL_REDUCE, stream, () -> inner.allReduce(buffer, reduction, stream));
    }

    @Override
    public void broadcast(Tensor buffer, int root, Backend.Stream stream) {
        collective(CommOp.BROADCAST, stream, () -> inner.broadcast(buffer, root, stream));
    }

    @Override
    public void barrier(Backend.Stream stream) {
        collective(CommOp.BARRIER, stream, () -> inner.barrier(stream));
    }

    @Override
    public boolean sharesMemory() {
        return inner.sharesMemory();
    }

    @Override
    public SharedBuffer sharedBuffer(DType dtype, MemoryCategory category, long numel) {
        return inner.sharedBuffer(dtype, category, numel);
    }

    @Override
    public CommCounters counters() {
        return inner.counters();
    }

    @Override
    public void abort(Throwable cause) {
        inner.abort(cause);
    }

    @Override
    public void close() {
        inner.close();
    }
}
