// The engine's options each change nothing they should not: micro-batches, activation
// checkpointing, CPU offload, clipping, prefetch depth and AdamW all still match the unsharded
// reference; half-precision policies match it within tolerances derived from their rounding;
// and fp16 loss scaling skips an overflowing step and recovers.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;
import static org.fsdp4j.fsdp.FsdpTestSupport.config;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.fsdp4j.fsdp.FsdpTestSupport.Tolerance;
import org.fsdp4j.optim.AdamW;
import org.fsdp4j.tensor.DType;
import org.junit.jupiter.api.Test;

class FsdpFeaturesTest {

    private static final Tolerance FP32 = FsdpEquivalenceTest.FP32;

    private final FsdpTestSupport t = new FsdpTestSupport();

    @Test
    void microBatchesCheckpointingOffloadPrefetchAndClippingMatchTheReference() {
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        t.assertMatches("full_shard N=4 M=3", ref,
                t.sharded(config(4, ShardingStrategy.FULL_SHARD).withMicroBatches(3), SGD, false), FP32);
        t.assertMatches("hybrid_shard N=4 S=2 M=2", ref,
                t.sharded(config(4, ShardingStrategy.HYBRID_SHARD).withMicroBatches(2), SGD, false), FP32);
        t.assertMatches("full_shard N=3 checkpointed", ref,
                t.sharded(config(3, ShardingStrategy.FULL_SHARD), SGD, true), FP32);
        t.assertMatches("shard_grad_op N=2 checkpointed M=2", ref,
                t.sharded(config(2, ShardingStrategy.SHARD_GRAD_OP).withMicroBatches(2), SGD, true), FP32);
        t.assertMatches("full_shard N=2 offload", ref,
                t.sharded(config(2, ShardingStrategy.FULL_SHARD).withOffload(true), SGD, false), FP32);
        t.assertMatches("optimizer_only N=4 offload", ref,
                t.sharded(config(4, ShardingStrategy.OPTIMIZER_ONLY).withOffload(true), SGD, false), FP32);
        t.assertMatches("no_shard N=2 offload", ref,
                t.sharded(config(2, ShardingStrategy.NO_SHARD).withOffload(true), SGD, false), FP32);
        t.assertMatches("full_shard N=4 prefetch 0", ref,
                t.sharded(config(4, ShardingStrategy.FULL_SHARD).withPrefetchDepth(0), SGD, false), FP32);
        t.assertMatches("full_shard N=4 prefetch 2", ref,
                t.sharded(config(4, ShardingStrategy.FULL_SHARD).withPrefetchDepth(2), SGD, false), FP32);

        float maxNorm = 0.05f;   // below every step's norm: every step clips
        FsdpTestSupport.Trajectory clipped = t.reference(SGD, maxNorm);
        for (ShardingStrategy s : List.of(ShardingStrategy.FULL_SHARD, ShardingStrategy.HYBRID_SHARD,
                ShardingStrategy.NO_SHARD, ShardingStrategy.OPTIMIZER_ONLY)) {
            List<FsdpTestSupport.RankTrajectory> ranks = t.sharded(config(4, s).withMaxGradNorm(maxNorm), SGD, false);
            t.assertMatches(s.cliName() + " N=4 clipped", clipped, ranks, FP32);
            assertTrue(ranks.get(0).results().get(0).gradNorm() > maxNorm, "the test must clip");
        }
    }

    @Test
    void adamWMatchesTheReference() {
        // Adam divides by √v + eps, so a gradient that is pure rounding noise (the key bias's is
        // exactly zero in exact arithmetic: softmax ignores a per-row constant) moves its parameter
        // by up to lr whatever its size: noise that differs between summation orders becomes a
        // difference of lr. eps = 1e-3 keeps such noise (≤ 1e-8) from moving anything by more
        // than lr·1e-5, so this checks the sharded AdamW's wiring (segments, per-parameter weight
        // decay, bias correction) at the fp32 tolerance; SGD is the sharper parity test.
        AdamW adam = new AdamW(1e-2f, 0.9f, 0.95f, 1e-3f, 0.1f);
        FsdpTestSupport.Trajectory ref = t.reference(adam, 0f);
        t.assertMatches("full_shard N=3 adamw", ref, t.sharded(config(3, ShardingStrategy.FULL_SHARD), adam, false), FP32);
        t.assertMatches("hybrid_shard N=4 S=2 adamw", ref,
                t.sharded(config(4, ShardingStrategy.HYBRID_SHARD), adam, false), FP32);
    }

    @Test
    void halfPrecisionPoliciesStayWithinTheirRoundingOfTheFp32Reference() {
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        for (MixedPrecisionPolicy p : List.of(new MixedPrecisionPolicy(DType.BF16, DType.F32),
                new MixedPrecisionPolicy(DType.BF16, DType.BF16), new MixedPrecisionPolicy(DType.F16, DType.F16),
                new MixedPrecisionPolicy(DType.F32, DType.F16))) {
            for (int n : new int[] {2, 4}) {
                FsdpConfig c = config(n, ShardingStrategy.FULL_SHARD).withPrecision(p);
                t.assertMatches("full_shard N=" + n + " " + p, ref, t.sharded(c, SGD, false), halfTolerance(p));
            }
        }
    }

    /**
     * Half precision against the fp32 reference. Every parameter is rounded to the param dtype
     * (relative error u = 2^-9 for bf16, 2^-11 for fp16) before it is used, gradients are stored
     * in it and reduced in the reduce dtype. A gradient element then carries the rounding of
     * every unit's parameters upstream of it (3 units here, each used in forward and backward:
     * ~6u), its own storage and its reduction (~2u), relative to the gradient's scale: 8u, and
     * we allow twice that since the errors of the 5 steps compound (measured worst ~10u). The
     * fp32 masters move by lr × gradient, so they get the same bound. The loss is one dot
     * product away from the rounded parameters: u.
     */
    private static Tolerance halfTolerance(MixedPrecisionPolicy p) {
        double u = p.paramDtype() == DType.BF16 || p.reduceDtype() == DType.BF16 ? 0x1p-9 : 0x1p-11;
        return new Tolerance(u, 16 * u, 16 * u);
    }

    @Test
    void fp16LossScalingSkipsOverflowingStepsThenGrows() {
        // 2^24 times gradients of order 0.1 overflows fp16 (max 65504): steps are skipped, the
        // scale halves each time until the gradients fit, then doubles after 2 good steps.
        FsdpConfig c = config(2, ShardingStrategy.FULL_SHARD)
                .withPrecision(new MixedPrecisionPolicy(DType.F32, DType.F16)).withLossScaling(0x1p24f, 2);
        try (LocalFsdpGroup group = new LocalFsdpGroup(c, (r, b) -> new org.fsdp4j.model.GptModel(FsdpTestSupport.TINY, b, false),
                SGD, t.seed, FsdpTestSupport.BATCH, FsdpTestSupport.SEQ, 1, java.util.function.UnaryOperator.identity())) {
            float[] initial = group.onEachRank((r, e) -> e.shard(1).master()).get(0);
            float scale = 0x1p24f;
            int skipped = 0;
            int step = 0;
            FsdpStepResult res;
            do {
                res = group.step(t.tokens[0], t.targets[0], SGD.lr()).get(0);
                assertEquals(scale, res.lossScale(), "step " + step);
                if (res.skipped()) {
                    skipped++;
                    scale /= 2;
                    assertFalse(Double.isFinite(res.gradNorm()));
                    org.junit.jupiter.api.Assertions.assertArrayEquals(initial,
                            group.onEachRank((r, e) -> e.shard(1).master()).get(0), "a skipped step changes nothing");
                }
                step++;
            } while (res.skipped() && step < 20);
            assertTrue(skipped >= 1 && !res.skipped(), "expected overflow at 2^24 and recovery, got " + skipped + " skips");
            assertTrue(Double.isFinite(res.gradNorm()));
            FsdpStepResult second = group.step(t.tokens[1], t.targets[1], SGD.lr()).get(0);
            assertEquals(scale, second.lossScale());
            assertFalse(second.skipped());
            assertEquals(2 * scale, group.step(t.tokens[2], t.targets[2], SGD.lr()).get(0).lossScale(),
                    "the scale doubles after 2 good steps");
        }
    }
}
