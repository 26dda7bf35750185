// The optimizer's per-parameter state for a list of targets: one flat fp32 buffer per state
// slot (m and v for AdamW, momentum for SGD), tracked as OPTIMIZER, zero at start, with a view
// per target. Tests build it over whole parameters (ParameterStore's targets); the FSDP engine
// keeps its own state per shard (ShardedUnit). The optimizers only see the resulting segments.
package org.fsdp4j.optim;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

public final class OptimizerState implements AutoCloseable {

    /** A parameter (or slice) to optimize, its gradient, and whether weight decay applies. */
    public record Target(Tensor param, Tensor grad, boolean weightDecay) {
    }

    private final List<Tensor> buffers = new ArrayList<>();   // per slot, (Σ target numel) fp32
    private final List<ParamSegment> segments;

    /** Allocates {@code buffersPerParam} (1 or 2) zeroed state buffers covering all targets on {@code backend}. */
    public OptimizerState(Backend backend, List<Target> targets, int buffersPerParam) {
        if (buffersPerParam < 1 || buffersPerParam > 2) {
            throw new IllegalArgumentException("optimizers keep 1 or 2 state buffers per parameter, got "
                    + buffersPerParam);
        }
        long total = 0;
        for (Target t : targets) {
            total += t.param().numel();
        }
        for (int s = 0; s < buffersPerParam; s++) {
            buffers.add(backend.zeros(DType.F32, MemoryCategory.OPTIMIZER, total));   // (Σ numel)
        }
        List<ParamSegment> segs = new ArrayList<>();
        long offset = 0;
        for (Target t : targets) {
            long n = t.param().numel();
            Tensor m = buffers.get(0).view(offset, n);
            Tensor v = buffersPerParam == 2 ? buffers.get(1).view(offset, n) : null;
            segs.add(new ParamSegment(t.param(), t.grad(), m, v, t.weightDecay()));
            offset += n;
        }
        this.segments = List.copyOf(segs);
    }

    /** For {@code optimizer}: as many buffers as it keeps per parameter. */
    public OptimizerState(Backend backend, List<Target> targets, Optimizer optimizer) {
        this(backend, targets, optimizer.stateBuffersPerParam());
    }

    public List<ParamSegment> segments() {
        return segments;
    }

    /** Bytes of state held (what the memory model calls the optimizer's share). */
    public long numBytes() {
        long n = 0;
        for (Tensor b : buffers) {
            n += b.numBytes();
        }
        return n;
    }

    @Override
    public void close() {
        buffers.forEach(Tensor::close);
    }
}
