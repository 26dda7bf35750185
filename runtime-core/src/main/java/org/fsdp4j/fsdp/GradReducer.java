// Turns a unit's unsharded gradient into this rank's reduced fp32 gradient shard. Everything it
// issues goes on the reduce stream (the caller has ordered that stream after the backward that
// wrote the gradient): cast to the reduce dtype, then by strategy
//   sharded       reduce-scatter over the shard group (HYBRID: then, on the all-reduce stream,
//                 all-reduce the shard across the replicate axis, so the next unit's
//                 reduce-scatter does not queue behind it)
//   shard of 1    all-reduce across the replicate axis (NO_SHARD; nothing at N = 1)
//   ZeRO-1        all-reduce over the shard group, keep this rank's chunk (OPTIMIZER_ONLY)
// and finally widen into the gradient shard (on the host under offload), or add into it when an
// earlier segment of the same step has already written it (ROOT_GRAD_SPLIT). The average over
// N is taken in the collectives: AVG for fp32/bf16; for fp16, FSDP2's sum with a pre-divide by a
// power of two near √N before the first collective and the rest after the last.
// Temporaries live on the stream that uses them (recordStream where a second stream reads one),
// so the host frees them as soon as their work is issued and nothing waits for a free.
package org.fsdp4j.fsdp;

import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommTag;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.Reduction;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.Tensor;

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

    GradReducer(Backend device, FsdpConfig config, Communicator shardGroup, Communicator replicateGroup,
                Backend.Stream reduceStream, Backend.Stream allReduceStream) {
        this.device = device;
        this.reduceDtype = config.precision().reduceDtype();
        this.zeroOne = config.strategy() == ShardingStrategy.OPTIMIZER_ONLY;
        this.offload = config.offload();
        this.shardGroup = shardGroup;
        this.replicateGroup = replicateGroup;
        this.reduceStream = reduceStream;
        this.allReduceStream = allReduceStream;
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
     * or, with {@code accumulate}, adding to it. The caller keeps grad alive (and has named the
     * reduce stream with recordStream, or waits for the reduction before freeing it).
     */
    void reduce(ShardedUnit u, Tensor grad, boolean accumulate) {
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
                    copyUnlessSame(in, u.gradShard);
                } else if (zeroOne) {
                    shardGroup.allReduce(in, only, reduceStream);
                    device.copy(in.view(u.shardIndex * shardNumel, shardNumel), u.gradShard);
                } else if (!hasAllReducePhase(u)) {
                    // (shardNumel) reduce dtype: straight into the shard when it is fp32 on the device
                    boolean inPlace = reduceDtype == DType.F32 && !offload && !accumulate;
                    Tensor out = inPlace ? u.gradShard
                            : device.allocate(reduceDtype, MemoryCategory.WORKSPACE, shardNumel);
                    try {
                        shardGroup.reduceScatter(in, out, only, reduceStream);
                        into(out, u.gradShard, accumulate);
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
                            into(out, u.gradShard, accumulate);
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

    /** shard (fp32, maybe on the host) = or += the reduced chunk, on the current stream. */
    private void into(Tensor out, Tensor shard, boolean accumulate) {
        if (accumulate) {
            device.accumulate(shard, out);
        } else {
            copyUnlessSame(out, shard);
        }
    }

    private void copyUnlessSame(Tensor src, Tensor dst) {
        if (src != dst) {
            device.copy(src, dst);
        }
    }
}
