// The tracker's model of a step, computed from the shapes alone: persistent state per
// DESIGN.md's memory model (from each unit's padded flat layout and the strategy), the unit
// buffers from UnitBufferPlan, and the activations as the model (GptModel, LlamaModel, both on
// DecoderModel's skeleton) allocates and frees them. The activation peak is the largest of a few
// instants: the last block's forward, the head's backward (every block's saved activations, the
// logits, and the two (B, T, C) gradients) and the last block's backward (the logits freed, that
// block's backward temporaries allocated). Peaks of the parts are
// added, so the total leans high where they do not coincide. Checked against the measured
// peak by AnalyticStepCostTest; the planner (issue 11) replaces it.
package org.fsdp4j.train;

import java.util.List;
import org.fsdp4j.fsdp.FlatParamLayout;
import org.fsdp4j.fsdp.ShardingStrategy;
import org.fsdp4j.fsdp.UnitBufferPlan;
import org.fsdp4j.metrics.Flops;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.model.ModelConfig;
import org.fsdp4j.model.ParamSpec;
import org.fsdp4j.tensor.DType;

public final class AnalyticStepCost implements StepCostModel {

    private static final long F32 = 4;    // activations are always fp32
    private static final long I32 = 4;

    @Override
    public StepCost estimate(TrainConfig c) {
        ModelConfig m = c.model();
        boolean sharded = c.sharded();
        int ranks = sharded ? c.worldSize() : 1;
        int microBatches = sharded ? c.microBatches() : 1;
        long microBatch = c.batchSize() / ranks / microBatches;      // b: sequences per forward on one rank
        Activations act = activations(m, microBatch, c.seqLen(), c.checkpointActivations());
        long tokens = 2 * I32 * microBatch * c.seqLen() * microBatches;   // tokens and targets, (b, T) I32 each

        long persistent;
        long temporary = 0;
        long host = 0;
        long largest = act.largestBytes();
        if (!sharded) {
            persistent = 16 * m.parameterCount();                  // param, grad, AdamW m and v, fp32
        } else {
            Units u = units(m, c);
            persistent = u.devicePersistent;
            host = u.hostPersistent;
            temporary = u.temporary;
            largest = Math.max(largest, u.largestUnitBytes);
        }
        long activations = act.peakBytes() + tokens;
        double flops = Flops.trainingStep(m, m.parameterCount(), c.batchSize(), c.seqLen());
        return new StepCost(persistent + temporary + activations, persistent, temporary, activations, host, largest,
                flops);
    }

    /** The peak of one forward + backward's activations on {@code b} sequences, and its largest buffer. */
    record Activations(long peakBytes, long largestBytes) {
    }

    /**
     * One block's activations and the head's, in elements, for b sequences of t tokens: what a block
     * saves for its backward, the most it holds at once in its forward (its saved activations
     * included) and its backward's temporaries on top of what it saved; the final norm's output and
     * statistics with the logits and per-token losses; what one pass holds throughout (rotary
     * tables); the largest single buffer.
     */
    private record Shape(long x, long saved, long forwardPeak, long backwardTemps, long head, long perPass,
                         long largest) {
    }

    static Activations activations(ModelConfig m, long b, long t, boolean checkpointed) {
        Shape s = m instanceof LlamaConfig l ? llama(l, b, t) : gpt((GptConfig) m, b, t);
        long layers = m.numLayers();
        long x = s.x;
        long peak;
        if (checkpointed) {
            // blocks keep only their outputs (and the embedding's); in backward the last block's output
            // is freed, the residual gradient allocated and the block's internals recomputed
            long kept = (layers + 1) * x;
            peak = Math.max(kept + s.head + 2 * x, kept + Math.max(s.forwardPeak, s.saved + s.backwardTemps));
        } else {
            long forward = x + layers * (x + s.saved) + s.head;
            long lastBlockForward = x + (layers - 1) * (x + s.saved) + x + s.forwardPeak;
            long headBackward = forward + 2 * x;                              // dnorm and the residual gradient
            long lastBlockBackward = (layers + 1) * x + layers * s.saved + s.backwardTemps;
            peak = Math.max(Math.max(lastBlockForward, headBackward), lastBlockBackward);
        }
        return new Activations(F32 * (peak + s.perPass), F32 * s.largest);
    }

    private static Shape gpt(GptConfig m, long b, long t) {
        long x = b * t * m.embedDim();                       // (b, T, C)
        long att = b * m.numHeads() * t * t;                 // (b, H, T, T)
        long rows = b * t;                                   // LayerNorm mean or rstd, per-token losses
        long logits = b * t * m.vocabSize();                 // (b, T, V)
        // a block's saved activations: ln1 and ln2 outputs, q, k, v, the merged heads, the
        // attention residual (1 x each), the MLP's fc and GELU outputs (4 x each), the attention
        // probabilities, and two LayerNorms' mean and rstd
        long saved = 15 * x + att + 4 * rows;
        // inside a block's forward: the pre-softmax scores live next to the probabilities
        long forwardPeak = Math.max(saved, 5 * x + 2 * att + 2 * rows);
        // a block's backward on top of what it keeps: the MLP's (b, T, 4C) gradients (dgelu + dfc
        // + dln2), or the attention's score gradients (datt + dpreatt) or dq, dk with datt
        long backwardTemps = Math.max(9 * x, Math.max(2 * x + 2 * att, 4 * x + att));
        long head = x + 3 * rows + logits;                   // final LayerNorm output and stats, logits, losses
        return new Shape(x, saved, forwardPeak, backwardTemps, head, 0, Math.max(logits, Math.max(att, 4 * x)));
    }

    private static Shape llama(LlamaConfig m, long b, long t) {
        long x = b * t * m.embedDim();                       // (b, T, C): also q, the merged heads
        long kv = b * t * m.kvDim();                         // (b, T, Hkv·D): k or v
        long f = b * t * m.hiddenDim();                      // (b, T, F): gate, up, their product
        long att = b * m.numHeads() * t * t;                 // (b, H, T, T)
        long rows = b * t;                                   // RMSNorm rstd, per-token losses
        long logits = b * t * m.vocabSize();                 // (b, T, V)
        // a block's saved activations: both RMSNorms' outputs, the attention residual, q and the
        // merged heads (1 x each), k and v, the probabilities, gate, up and their product, two rstd
        long saved = 5 * x + 2 * kv + att + 3 * f + 2 * rows;
        // inside the attention's forward, after rmsnorm1's output and rstd and the residual (2x + rows):
        // the fused qkv next to q, k, v; the scores next to the probabilities; the heads' outputs
        // next to the merged ones
        long inAttention = Math.max(2 * (x + 2 * kv), Math.max(x + 2 * kv + 2 * att, 3 * x + 2 * kv + att));
        long forwardPeak = Math.max(saved, 2 * x + rows + inAttention);
        // a block's backward on top of what it keeps: dnorm2 with the MLP's dhidden, dgate, dup; or
        // dnorm1 with the attention's gradients at their most (dy and dyHeads, the score gradients with
        // dv, dq, dk, dv with dpreatt, or dq, dk, dv with the fused dqkv)
        long inAttentionBackward = Math.max(Math.max(2 * x, x + att + kv), Math.max(Math.max(2 * att + kv,
                x + att + 2 * kv), 2 * (x + 2 * kv)));
        long backwardTemps = Math.max(x + 3 * f, x + inAttentionBackward);
        long head = x + 2 * rows + logits;                   // final RMSNorm output and rstd, logits, losses
        long tables = t * m.headDim();                       // the rotary cosines and sines, (T, D/2) each
        return new Shape(x, saved, forwardPeak, backwardTemps, head, tables,
                Math.max(logits, Math.max(att, Math.max(f, x + 2 * kv))));
    }

    /** Per-rank bytes of the FSDP engine's unit state, following ShardedUnit's and GradReducer's buffers. */
    private record Units(long devicePersistent, long hostPersistent, long temporary, long largestUnitBytes) {
    }

    private static Units units(ModelConfig m, TrainConfig c) {
        DType paramDtype = c.precision().paramDtype();
        DType reduceDtype = c.precision().reduceDtype();
        long pb = paramDtype.byteSize();
        int shards = c.fsdp().shardSize();
        ShardingStrategy strategy = c.strategy();
        boolean replicated = strategy.replicatesParams() || shards == 1;
        boolean fp32OnDevice = paramDtype == DType.F32 && !c.offload();
        List<List<ParamSpec>> specs = m.unitSpecs();
        long[] unitBytes = new long[specs.size()];           // gathered size in the param dtype
        long device = 0;
        long optimizerSide = 0;                              // master, gradient shard, m and v: device or host
        long largestUnit = 0;
        long allUnits = 0;
        for (int u = 0; u < specs.size(); u++) {
            FlatParamLayout layout = FlatParamLayout.of(specs.get(u), paramDtype, shards);
            long shard = layout.shardNumel();
            unitBytes[u] = layout.numel() * pb;
            largestUnit = Math.max(largestUnit, unitBytes[u]);
            allUnits += unitBytes[u];
            if (replicated) {
                device += layout.numel() * pb;                       // whole parameters, all run
                optimizerSide += fp32OnDevice ? 0 : 4 * shard;       // a separate fp32 master
            } else {
                optimizerSide += 4 * shard;                          // master
                device += fp32OnDevice ? 0 : pb * shard;             // the all-gather input
            }
            optimizerSide += 4 * shard + 8 * shard;                  // gradient shard, AdamW m and v
        }
        long hostBytes = c.offload() ? optimizerSide : 0;
        long devicePersistent = device + (c.offload() ? 0 : optimizerSide);

        boolean accumulatesIntoShard = shards == 1 && fp32OnDevice;
        long unitTemps;
        if (strategy.reshardsAfterForward() && shards > 1) {
            unitTemps = UnitBufferPlan.of(unitBytes, c.prefetch(), true).peakBytes();
        } else if (!replicated) {
            unitTemps = allUnits + 2 * largestUnit;                  // SHARD_GRAD_OP keeps every unit gathered
        } else {
            unitTemps = accumulatesIntoShard ? 0 : 2 * largestUnit; // unsharded gradients in flight
        }
        if (c.microBatches() > 1 && !accumulatesIntoShard) {
            unitTemps += allUnits;                                   // every unit's gradient lives to the last micro-batch
        }
        long workspace = 0;
        if (reduceDtype != paramDtype) {
            workspace += largestUnit / pb * reduceDtype.byteSize();  // the gradient cast to the reduce dtype
        }
        if (paramDtype != DType.F32) {
            workspace += 2 * 4 * maxParamNumel(specs);              // the CPU GEMM widens a half weight and its gradient
        }
        return new Units(devicePersistent, hostBytes, unitTemps + workspace, largestUnit);
    }

    private static long maxParamNumel(List<List<ParamSpec>> specs) {
        long max = 0;
        for (List<ParamSpec> unit : specs) {
            for (ParamSpec p : unit) {
                max = Math.max(max, p.numel());
            }
        }
        return max;
    }
}
