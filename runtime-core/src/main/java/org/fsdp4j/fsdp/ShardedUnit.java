// One unit's flat parameter on one rank: the persistent buffers (fp32 master shard, gradient
// shard, optimizer state, the param-dtype shard the all-gather sends, or the whole parameters
// when a strategy keeps them replicated) and the step-time state (gathered or not, the
// unsharded gradient being accumulated). The engine drives the transitions; this class owns
// the buffers and decides which of them may alias, so no byte is held twice.
//
//   master      (shardNumel) fp32, optimizer backend   — what the optimizer updates
//   gatherInput (shardNumel) param dtype, device        — = master when fp32 on the device
//   shared      (numel)      fp32, one for the group    — fp32 CPU ranks sharing memory only: every rank's
//                                                         master is its chunk, and the all-gather's
//                                                         output is this buffer itself (no copy)
//   full        (numel)      param dtype, device        — replicated params only (else gathered per use)
//   gradShard   (shardNumel) fp32, optimizer backend    — reduced gradient of this shard
//   state[k]    (shardNumel) fp32, optimizer backend    — AdamW m, v / SGD momentum, padding included
package org.fsdp4j.fsdp;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.SharedBuffer;
import org.fsdp4j.optim.ParamSegment;

final class ShardedUnit implements AutoCloseable {

    /** Whether the unit's unsharded parameters exist on this rank right now. */
    enum ShardState { SHARDED, UNSHARDED }

    final Unit unit;
    final FlatParamLayout layout;
    final int shardIndex;
    /** Parameters are gathered for the whole run (a shard group of 1, or replicated by the strategy). */
    final boolean persistent;
    final Tensor master;
    final Tensor gatherInput;
    final Tensor full;                 // null unless persistent
    /** Where the group's ranks hold their masters side by side, each gather reading it in place; else null. */
    final SharedBuffer shared;
    final Tensor gradShard;
    /** The optimizer's state buffers (AdamW m, v), each (shardNumel) fp32, padding included. */
    final List<Tensor> optimizerState;
    /** The model accumulates straight into gradShard (a shard group of 1, fp32 params, no offload). */
    final boolean accumulatesIntoGradShard;
    final List<ParamSegment> segments;
    private final Backend device;
    private final List<Tensor> owned = new ArrayList<>();

    /** An all-gather issued on the all-gather stream: its output (numel, param dtype) and the event after it. */
    record PendingGather(Tensor output, Backend.Event done) {
    }

    // step-time state, touched by the rank's own thread only
    ShardState state;
    Tensor gathered;                             // (numel) param dtype while UNSHARDED
    PendingGather pendingGather;                 // an all-gather issued and not yet waited for by compute
    Tensor unshardedGrad;                        // (numel) param dtype while backward accumulates
    Tensor offloadSum;                           // (shardNumel) F32 on the device: offload, between a unit's reductions
    boolean gradShardWritten;                    // a reduction has written gradShard this step: later ones add

    /**
     * Allocates and initialises the shard: the master shard is filled from {@code initialValues}
     * (ParamInit's seeded values, or loaded weights) for exactly the parameter elements it holds
     * (padding zero); the engine then casts it into the
     * all-gather input (syncGatherInput), once the device may read it.
     * Replicated parameters still need an all-gather across the shard group afterwards
     * (the engine issues it: it is a collective).
     */
    ShardedUnit(Unit unit, FlatParamLayout layout, int shardIndex, boolean replicated, Backend device,
                Backend optimizerBackend, int optimizerBuffers, ParamSource initialValues, Communicator sharesMasters) {
        this.unit = unit;
        this.layout = layout;
        this.shardIndex = shardIndex;
        this.device = device;
        DType paramDtype = layout.paramDtype();
        long shardNumel = layout.shardNumel();
        boolean fp32OnDevice = paramDtype == DType.F32 && optimizerBackend == device;
        this.persistent = replicated || layout.shardCount() == 1;
        SharedBuffer sharedMasters = null;
        try {
            if (!persistent && fp32OnDevice && sharesMasters != null) {
                // collective: every rank of the shard group builds its units in the same order; null on every
                // rank alike where the system would not give the memory (then the masters are each rank's own)
                sharedMasters = sharesMasters.sharedBuffer(DType.F32, MemoryCategory.PARAMS, layout.numel());
            }
            if (sharedMasters != null) {
                this.full = null;
                this.master = sharedMasters.tensor().view(shardIndex * shardNumel, shardNumel);
                this.gatherInput = master;
            } else if (persistent) {
                this.full = own(device.allocate(paramDtype, MemoryCategory.PARAMS, layout.numel()));
                this.gatherInput = full.view(shardIndex * shardNumel, shardNumel);
                this.master = fp32OnDevice ? gatherInput
                        : own(optimizerBackend.allocate(DType.F32, MemoryCategory.PARAMS, shardNumel));
            } else {
                this.full = null;
                this.master = own(optimizerBackend.allocate(DType.F32, MemoryCategory.PARAMS, shardNumel));
                this.gatherInput = fp32OnDevice ? master
                        : own(device.allocate(paramDtype, MemoryCategory.PARAMS, shardNumel));
            }
            this.shared = sharedMasters;
            this.gradShard = own(optimizerBackend.zeros(DType.F32, MemoryCategory.GRADS, shardNumel));
            this.accumulatesIntoGradShard = layout.shardCount() == 1 && fp32OnDevice;
            List<Tensor> state = new ArrayList<>();
            for (int k = 0; k < optimizerBuffers; k++) {
                state.add(own(optimizerBackend.zeros(DType.F32, MemoryCategory.OPTIMIZER, shardNumel)));
            }
            this.optimizerState = List.copyOf(state);
            List<ParamSegment> segs = new ArrayList<>();
            for (ShardSlice s : layout.slices(shardIndex)) {
                segs.add(new ParamSegment(master.view(s.shardOffset(), s.numel()), gradShard.view(s.shardOffset(), s.numel()),
                        state.get(0).view(s.shardOffset(), s.numel()),
                        optimizerBuffers == 2 ? state.get(1).view(s.shardOffset(), s.numel()) : null,
                        s.spec().weightDecay()));
            }
            this.segments = List.copyOf(segs);

            float[] values = new float[Math.toIntExact(shardNumel)];   // padding stays 0
            for (ShardSlice s : layout.slices(shardIndex)) {
                initialValues.fill(s.spec(), s.paramOffset(), values, Math.toIntExact(s.shardOffset()),
                        Math.toIntExact(s.numel()));
            }
            optimizerBackend.copyFromHost(values, 0, master);   // the engine then writes gatherInput (syncGatherInput)
            if (persistent) {
                this.state = ShardState.UNSHARDED;
                this.gathered = full;
                unit.bindParams(layout.views(full));
            } else {
                this.state = ShardState.SHARDED;
            }
        } catch (RuntimeException e) {
            owned.forEach(Tensor::close);
            if (sharedMasters != null) {
                sharedMasters.close();
            }
            throw e;
        }
    }

    private Tensor own(Tensor t) {
        owned.add(t);
        return t;
    }

    boolean isRoot() {
        return unit.index() == 0;
    }

    /** Writes the param-dtype copy the next all-gather sends (a cast, and/or a host-to-device copy). */
    void syncGatherInput() {
        if (gatherInput != master) {
            device.copy(master, gatherInput);
        }
    }

    /** The buffer backward accumulates into this step: zeroed on first use, kept across micro-batches. */
    Tensor beginGradAccumulation() {
        if (unshardedGrad == null) {
            if (accumulatesIntoGradShard) {
                device.fill(gradShard, 0f);
                unshardedGrad = gradShard;
            } else {
                unshardedGrad = device.zeros(layout.paramDtype(), MemoryCategory.GRADS, layout.numel());
            }
        }
        return unshardedGrad;
    }

    /** Frees the gathered parameters (never the persistent ones). */
    void reshard() {
        if (persistent || state == ShardState.SHARDED) {
            return;
        }
        unit.unbindParams();
        releaseGathered(gathered);
        gathered = null;
        state = ShardState.SHARDED;
    }

    /** A gathered buffer for u's parameters: the shared masters themselves, or a new one. */
    Tensor newGathered() {
        return shared != null ? shared.tensor()
                : device.allocate(layout.paramDtype(), MemoryCategory.GATHERED, layout.numel());
    }

    private void releaseGathered(Tensor t) {
        if (shared == null) {
            t.close();
        }
    }

    /**
     * Unbinds the unit and frees every buffer, including a gather still held; idempotent. The
     * engine has let its streams finish first, so nothing still reads these.
     */
    @Override
    public void close() {
        unit.unbindParams();
        unit.unbindGrads();
        if (!persistent && gathered != null) {
            releaseGathered(gathered);
            gathered = null;
        }
        if (pendingGather != null) {
            releaseGathered(pendingGather.output());   // a prefetch nobody waited for
            pendingGather = null;
        }
        if (unshardedGrad != null && unshardedGrad != gradShard) {
            unshardedGrad.close();
        }
        if (offloadSum != null) {
            offloadSum.close();
            offloadSum = null;
        }
        unshardedGrad = null;
        owned.forEach(Tensor::close);
        if (shared != null) {
            shared.close();
        }
    }
}
