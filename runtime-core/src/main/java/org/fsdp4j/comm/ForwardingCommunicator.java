// A communicator that passes everything to another one, with every collective routed through
// one method a decorator overrides (to delay it, record it, ...). LatencyCommunicator and the
// tests' recording communicators are written on it, so each says only what it changes.
package org.fsdp4j.comm;

import java.util.function.Supplier;
import org.fsdp4j.tensor.Tensor;

public abstract class ForwardingCommunicator implements Communicator {

    protected final Communicator inner;

    protected ForwardingCommunicator(Communicator inner) {
        this.inner = inner;
    }

    /** Every collective comes through here: {@code call} issues it on the inner communicator. */
    protected CommHandle collective(CommOp op, Supplier<CommHandle> call) {
        return call.get();
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
    public CommHandle allGather(Tensor input, Tensor output) {
        return collective(CommOp.ALL_GATHER, () -> inner.allGather(input, output));
    }

    @Override
    public CommHandle reduceScatter(Tensor input, Tensor output, Reduction reduction) {
        return collective(CommOp.REDUCE_SCATTER, () -> inner.reduceScatter(input, output, reduction));
    }

    @Override
    public CommHandle allReduce(Tensor buffer, Reduction reduction) {
        return collective(CommOp.ALL_REDUCE, () -> inner.allReduce(buffer, reduction));
    }

    @Override
    public CommHandle broadcast(Tensor buffer, int root) {
        return collective(CommOp.BROADCAST, () -> inner.broadcast(buffer, root));
    }

    @Override
    public CommHandle barrier() {
        return collective(CommOp.BARRIER, inner::barrier);
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
