// Turns a unit's unsharded gradient into this rank's reduced fp32 gradient shard. Everything it
// issues goes on the reduce stream (the caller has ordered that stream after the backward that
// wrote the gradient): cast to the reduce dtype, then by strategy
//   sharded       reduce-scatter over the shard group (HYBRID: then, on the all-reduce stream,
//                 all-reduce the shard across the replicate axis, so the next unit's
//                 reduce-scatter does not queue behind it)
//   shard of 1    all-reduce across the replicate axis (NO_SHARD; nothing at N = 1)
//   ZeRO-1        all-reduce over the shard group, keep this rank's chunk (OPTIMIZER_ONLY)
// and finally widen into the gradient shard, or add into it when an earlier segment of the same
// step has already written it (ROOT_GRAD_SPLIT). Under offload the gradient shard lives on the
// host: the shard's sum over segments is kept on the device until its last segment, its Σ g² is
// added into the step's device scalar there (so the norm needs no host work), and the finished
// shard is copied to the host once. The average over N is taken in the collectives: AVG for
// fp32/bf16; for fp16, FSDP2's sum with a pre-divide by a power of two near √N before the first
// collective and the rest after the last.
// Temporaries live on the stream that uses them (recordStream where a second stream reads one),
// so the host frees them as soon as their work is issued and nothing waits for a free.
package org.fsdp4j.fsdp;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommTag;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.Reduction;

final class GradReducer {

    private final Backend device;
    private final DType reduceDtype;
    private final boolean zeroOne;              // OPTIMIZER_ONLY
    private final boolean offload;              // the gradient shard lives on the host
    private final Communicator shardGroup;      // the reduce stream's own communicator over the shard group
    private final Communicator replicateGroup;  // on the reduce stream (shard of 1) or the all-reduce stream (HYBRID)
    private final Backend.Stream reduceStream;
    private final Backend.Stream allReduceStream;   // null unless a unit has an all-reduce phase
    private final Reduction only;               // when one collective reduces over all N
    private final Reduction first;              // the first of two (reduce-scatter, then all-reduce)
    private final Reduction second;
    private final float normScale;              // 1/R: each shard's Σ g² counted once across its R replicas

    GradReducer(Backend device, FsdpOptions config, Communicator shardGroup, Communicator replicateGroup,
                Backend.Stream reduceStream, Backend.Stream allReduceStream) {
        this.device = device;
        this.reduceDtype = config.precision().reduceDtype();
        this.zeroOne = config.strategy() == ShardingStrategy.OPTIMIZER_ONLY;
        this.offload = config.offload();
        this.shardGroup = shardGroup;
        this.replicateGroup = replicateGroup;
        this.reduceStream = reduceStream;
        this.allReduceStream = allReduceStream;
        this.normScale = 1f / config.replicateSize();
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

    private boolean hasAllReducePhase(ShardedUnit u) {
        return u.layout.shardCount() > 1 && !zeroOne && replicateGroup.size() > 1;
    }

    /** False when grad already is u's reduced gradient shard (one rank in all, fp32 on the device). */
    boolean hasWork(ShardedUnit u, Tensor grad) {
        return grad != u.gradShard || u.layout.shardCount() > 1 || replicateGroup.size() > 1;
    }

    /**
     * Issues the reduction of {@code grad} (numel, param dtype) into u.gradShard, overwriting it
     * or, with {@code accumulate}, adding to it; {@code last} says this is the unit's last
     * reduction of the step. Under offload Σ g² of the finished shard is added into
     * {@code normSquared} (one F32 on the device). The caller keeps grad alive (and has named the
     * reduce stream with recordStream, or waits for the reduction before freeing it).
     */
    void reduce(ShardedUnit u, Tensor grad, boolean accumulate, boolean last, Tensor normSquared) {
        if (accumulate && (u.layout.shardCount() == 1 || zeroOne)) {
            throw new IllegalStateException("unit " + u.unit.name() + ": only a reduce-scatter into a shard of its own "
                    + "can add to the gradient shard");
        }
        try (Backend.StreamScope s = device.onStream(reduceStream);
             CommTag.Scope tag = CommTag.of("unit " + u.unit.name())) {
            Tensor in = grad;                                                    // (numel) reduce dtype
            Tensor cast = null;
            if (grad.dtype() != reduceDtype) {
                cast = device.allocate(reduceDtype, MemoryCategory.WORKSPACE, u.layout.numel());
                device.copy(grad, cast);
                in = cast;
            }
            try {
                long shardNumel = u.layout.shardNumel();
                if (u.layout.shardCount() == 1) {
                    if (replicateGroup.size() > 1) {
                        replicateGroup.allReduce(in, only, reduceStream);
                    }
                    deliver(u, in, false, true, normSquared);
                } else if (zeroOne) {
                    shardGroup.allReduce(in, only, reduceStream);
                    deliver(u, in.view(u.shardIndex * shardNumel, shardNumel), false, true, normSquared);
                } else if (!hasAllReducePhase(u)) {
                    // (shardNumel) reduce dtype: straight into the shard when it is fp32 on the device
                    boolean inPlace = reduceDtype == DType.F32 && !offload && !accumulate;
                    Tensor out = inPlace ? u.gradShard
                            : device.allocate(reduceDtype, MemoryCategory.WORKSPACE, shardNumel);
                    try {
                        shardGroup.reduceScatter(in, out, only, reduceStream);
                        deliver(u, out, accumulate, last, normSquared);
                    } finally {
                        if (out != u.gradShard) {
                            out.close();
                        }
                    }
                } else {
                    Tensor out = device.allocate(reduceDtype, MemoryCategory.WORKSPACE, shardNumel);   // (shardNumel)
                    try {
                        shardGroup.reduceScatter(in, out, first, reduceStream);
                        allReduceStream.waitFor(reduceStream.record());
                        device.recordStream(out, allReduceStream);
                        try (Backend.StreamScope a = device.onStream(allReduceStream)) {
                            replicateGroup.allReduce(out, second, allReduceStream);
                            deliver(u, out, accumulate, last, normSquared);
                        }
                    } finally {
                        out.close();
                    }
                }
            } finally {
                if (cast != null) {
                    cast.close();
                }
            }
        }
    }

    /**
     * u's gradient shard = or += {@code reduced} (this rank's reduced chunk, on the device), on the
     * current stream. Under offload: the sum over segments stays on the device until the last, then
     * its Σ g² goes into normSquared and the shard is copied to the host.
     */
    private void deliver(ShardedUnit u, Tensor reduced, boolean accumulate, boolean last, Tensor normSquared) {
        if (!offload) {
            if (accumulate) {
                device.accumulate(u.gradShard, reduced);
            } else {
                copyUnlessSame(reduced, u.gradShard);
            }
            return;
        }
        Tensor finished = reduced;
        if (accumulate || !last) {                           // a unit reduced once per segment (the root)
            if (u.offloadSum == null) {
                u.offloadSum = device.allocate(DType.F32, MemoryCategory.WORKSPACE, reduced.numel());   // (shardNumel)
                device.copy(reduced, u.offloadSum);
            } else {
                device.accumulate(u.offloadSum, reduced);
            }
            if (!last) {
                return;
            }
            finished = u.offloadSum;
        }
        device.sumOfSquaresInto(finished, normScale, normSquared);
        device.copy(finished, u.gradShard);                  // to the host
        if (finished == u.offloadSum) {
            u.offloadSum.close();
            u.offloadSum = null;
        }
    }

    private void copyUnlessSame(Tensor src, Tensor dst) {
        if (src != dst) {
            device.copy(src, dst);
        }
    }
}
