// Turns a unit's unsharded gradient into this rank's reduced fp32 gradient shard, on the
// reduce stream: cast to the reduce dtype, then by strategy
//   sharded       reduce-scatter over the shard group (HYBRID: then, as a second phase the engine
//                 runs on its all-reduce stream, all-reduce the shard across the replicate axis)
//   shard of 1    all-reduce across the replicate axis (NO_SHARD; nothing at N = 1)
//   ZeRO-1        all-reduce over the shard group, keep this rank's chunk (OPTIMIZER_ONLY)
// and finally widen into the gradient shard (moving it to the host under offload), or add into
// it when an earlier segment of the same step has already written it (ROOT_GRAD_SPLIT). The average
// over N is taken in the collectives: AVG for fp32/bf16; for fp16, FSDP2's sum with a
// pre-divide by a power of two near √N before the first collective and the rest after the last.
package org.fsdp4j.fsdp;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.Reduction;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.Tensor;

final class GradReducer {

    private final Backend device;
    private final Backend optimizerBackend;     // holds the gradient shard (the host under offload)
    private final DType reduceDtype;
    private final boolean zeroOne;              // OPTIMIZER_ONLY
    private final boolean offload;              // the gradient shard lives on the host
    private final Communicator shardGroup;      // the reduce stream's own communicator over the shard group
    private final Communicator replicateGroup;
    private final Reduction only;               // when one collective reduces over all N
    private final Reduction first;              // the first of two (reduce-scatter, then all-reduce)
    private final Reduction second;

    GradReducer(Backend device, Backend optimizerBackend, FsdpConfig config, Communicator shardGroup,
                Communicator replicateGroup) {
        this.device = device;
        this.optimizerBackend = optimizerBackend;
        this.reduceDtype = config.precision().reduceDtype();
        this.zeroOne = config.strategy() == ShardingStrategy.OPTIMIZER_ONLY;
        this.offload = config.offload();
        this.shardGroup = shardGroup;
        this.replicateGroup = replicateGroup;
        if (reduceDtype == DType.F16) {
            Reduction f = Reduction.fp16Average(config.worldSize());
            this.only = f;
            this.first = Reduction.sumDivided(f.preDivide(), 1);
            this.second = Reduction.sumDivided(1, f.postDivide());
        } else {
            this.only = Reduction.AVG;
            this.first = Reduction.AVG;
            this.second = Reduction.AVG;
        }
    }

    /**
     * Whether u's reduction has a second phase: HYBRID_SHARD's all-reduce across replicas of the
     * reduce-scattered shard, which the engine runs on a stream of its own so the next unit's
     * reduce-scatter does not queue behind it (DESIGN.md "Streams").
     */
    boolean hasAllReducePhase(ShardedUnit u) {
        return u.layout.shardCount() > 1 && !zeroOne && replicateGroup.size() > 1;
    }

    /**
     * Reduces {@code grad} (numel, param dtype) into u.gradShard, overwriting it or, with
     * {@code accumulate}, adding to it; frees grad unless it is the shard itself. When
     * hasAllReducePhase(u), only the reduce-scatter runs here and the returned phase (run it
     * exactly once, on the all-reduce stream) finishes the job; otherwise it returns null.
     */
    Runnable reduce(ShardedUnit u, Tensor grad, boolean accumulate) {
        if (accumulate && (u.layout.shardCount() == 1 || zeroOne)) {
            throw new IllegalStateException("unit " + u.unit.name() + ": only a reduce-scatter into a shard of its own "
                    + "can add to the gradient shard");
        }
        List<Tensor> temps = new ArrayList<>();
        Runnable rest = null;                                                   // after the reduce-scatter
        try {
            Tensor in = grad;                                                   // (numel) reduce dtype
            if (grad.dtype() != reduceDtype) {
                in = temp(temps, u.layout.numel());
                device.copy(grad, in);
            }
            long shardNumel = u.layout.shardNumel();
            if (u.layout.shardCount() == 1) {
                if (replicateGroup.size() > 1) {
                    replicateGroup.allReduce(in, only).await();
                }
                copyUnlessSame(in, u.gradShard);
            } else if (zeroOne) {
                shardGroup.allReduce(in, only).await();
                device.copy(in.view(u.shardIndex * shardNumel, shardNumel), u.gradShard);
            } else {
                boolean hybrid = hasAllReducePhase(u);
                // (shardNumel) reduce dtype: straight into the shard when it is fp32 on the device
                boolean inPlace = reduceDtype == DType.F32 && !offload && !accumulate;
                Tensor out = inPlace ? u.gradShard : device.allocate(reduceDtype, MemoryCategory.WORKSPACE, shardNumel);
                try {
                    shardGroup.reduceScatter(in, out, hybrid ? first : only).await();
                } catch (RuntimeException e) {
                    closeUnlessShard(out, u);
                    throw e;
                }
                rest = () -> finish(u, out, hybrid, accumulate);
            }
        } finally {
            temps.forEach(Tensor::close);
            if (grad != u.gradShard) {
                grad.close();
            }
        }
        if (rest != null && !hasAllReducePhase(u)) {
            rest.run();
            return null;
        }
        return rest;
    }

    /** After the reduce-scatter into out (shardNumel): across replicas if hybrid, then into the shard; frees out. */
    private void finish(ShardedUnit u, Tensor out, boolean hybrid, boolean accumulate) {
        List<Tensor> temps = new ArrayList<>();
        try {
            if (hybrid) {
                replicateGroup.allReduce(out, second).await();
            }
            if (accumulate) {
                addInto(temps, out, u.gradShard);
            } else {
                copyUnlessSame(out, u.gradShard);
            }
        } finally {
            temps.forEach(Tensor::close);
            closeUnlessShard(out, u);
        }
    }

    private static void closeUnlessShard(Tensor t, ShardedUnit u) {
        if (t != u.gradShard) {
            t.close();
        }
    }

    /** shard (fp32, optimizer backend) += out (reduce dtype, device), widening and moving it first when needed. */
    private void addInto(List<Tensor> temps, Tensor out, Tensor shard) {
        if (out.dtype() == DType.F32 && !offload) {
            device.accumulate(shard, out);
            return;
        }
        Tensor widened = optimizerBackend.allocate(DType.F32, MemoryCategory.WORKSPACE, shard.numel());   // (shardNumel)
        temps.add(widened);
        device.copy(out, widened);
        optimizerBackend.accumulate(shard, widened);
    }

    private Tensor temp(List<Tensor> temps, long numel) {
        Tensor t = device.allocate(reduceDtype, MemoryCategory.WORKSPACE, numel);
        temps.add(t);
        return t;
    }

    private void copyUnlessSame(Tensor src, Tensor dst) {
        if (src != dst) {
            device.copy(src, dst);
        }
    }
}
