// The planner's arithmetic against hand computation: GPT-3 175B (96 layers, width 12288, 96 heads,
// vocabulary 50257, context 2048) on 64 and 1024 A100-80GB in bf16, whose unit sizes divide both
// N, so P′ = P and every figure is a closed form; and its communication volume against the bytes
// the runtime counts in a real step, for every strategy.
package org.fsdp4j.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.Trainer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class PlannerTest {

    private static final GptConfig GPT3 = new GptConfig(50257, 2048, 96, 96, 12288);
    private static final MixedPrecisionPolicy BF16 = new MixedPrecisionPolicy(DType.BF16, DType.BF16);

    private static Plan gpt3(int nodes, ShardingStrategy strategy, boolean checkpointed) {
        int n = 8 * nodes;
        return new Planner().plan(new PlanInput(GPT3, n, 2048, 8, nodes, strategy,
                strategy == ShardingStrategy.HYBRID_SHARD ? 8 : 0, BF16, checkpointed, false, 1, 1,
                Optional.of(GpuSpec.preset("A100-80GB"))));
    }

    @ParameterizedTest(name = "175B on {0} nodes of 8 A100-80GB")
    @CsvSource({"8", "128"})
    void gpt3MatchesHandComputation(int nodes) {
        long n = 8L * nodes;
        long c = 12288;
        long block = 12 * c * c + 13 * c;                         // 1,812,099,072
        long root = (50257 + 2048 + 2) * c;                      // wte, wpe, ln_f: 642,748,416
        long p = root + 96 * block;
        Plan plan = gpt3(nodes, ShardingStrategy.FULL_SHARD, true);
        assertEquals(174_604_259_328L, p, "GPT-3's parameter count");
        assertEquals(p, plan.params());
        assertEquals(p, plan.paddedParams(), "every unit divides by 64 and 1024: no padding");
        // fp32 master + bf16 all-gather input (6), fp32 gradient shard (4), AdamW m and v (8): 18 B per parameter / N
        assertEquals(6 * p / n, plan.memory().params());
        assertEquals(4 * p / n, plan.memory().grads());
        assertEquals(8 * p / n, plan.memory().optimizer());
        assertEquals(18 * p / n, plan.memory().persistent());
        assertEquals(18.0, plan.textbook().fsdp4jBytesPerParam(), 1e-9);
        // the ZeRO paper's mixed-precision figures, and the 24 B slip
        assertEquals(16 * p / n, plan.textbook().zero3Bytes());
        assertEquals(2 * p + 14 * p / n, plan.textbook().zero2Bytes());
        assertEquals(4 * p + 12 * p / n, plan.textbook().zero1Bytes());
        assertEquals(16 * p, plan.textbook().ddpBytes());
        assertEquals(24 * p / n, plan.textbook().slip24Bytes());
        // unit buffers at prefetch 1: keeping the root's gradient (r + 4b) would exceed the budget of two
        // gathered blocks + one gradient (3b), so the root's gradient is reduced per segment
        // (root_grad_split) and the peak is the budget itself, bf16: 2 · 3b
        assertEquals(2 * 3 * block, plan.memory().unitBuffers());
        // communication: all-gather every unit twice (bf16) but the last block, kept gathered from its
        // forward into its backward, reduce-scatter every unit once and the root a second time (its
        // two segments), (N-1)/N of each
        assertEquals((long) (2 * (2 * p - block) * ((n - 1) / (double) n)), plan.comm().allGatherBytes());
        assertEquals((long) (2 * (p + root) * ((n - 1) / (double) n)), plan.comm().reduceScatterBytes());
        assertEquals(plan.comm().total(), plan.comm().interNodeBytes(), "a ring over 8+ nodes runs at network speed");
        // compute: (6P + 12·L·C·T) per token, 2048 tokens per GPU, × 4/3 for the recompute, at 50% of 312 TFLOP/s
        double flops = 2048 * (6.0 * p + 12.0 * 96 * c * 2048) * 4 / 3;
        assertEquals(flops, plan.flopsPerGpu(), flops * 1e-12);
        assertEquals(flops / (0.5 * 312e12), plan.computeTimeS(), 1e-9);
        assertEquals(plan.comm().total() / 25e9, plan.commTimeS(), 1e-9);
        assertEquals(plan.commTimeS() / plan.computeTimeS(), plan.commComputeRatio(), 1e-12);
        assertTrue(plan.commComputeRatio() > Planner.RATIO_LIMIT, "one sequence per GPU cannot hide 3 × 2P bytes");
        assertTrue(plan.fits(), plan.explanation().toString());
        assertTrue(plan.recommendations().stream().anyMatch(r -> r.contains("T_comm/T_comp")), plan.recommendations().toString());
    }

    @Test
    void withoutSharding175bDoesNotFitAndThePlannerSaysWhatDoes() {
        Plan ddp = gpt3(8, ShardingStrategy.NO_SHARD, true);
        assertEquals(false, ddp.fits());
        assertTrue(ddp.recommendations().get(0).startsWith("does not fit as asked"), ddp.recommendations().toString());
        assertTrue(ddp.recommendations().get(0).contains("--strategy "), ddp.recommendations().toString());
        Plan noCheckpointing = gpt3(8, ShardingStrategy.FULL_SHARD, false);
        assertEquals(false, noCheckpointing.fits(), "96 layers of saved activations do not fit in 80 GB");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"full_shard, 0", "shard_grad_op, 0", "optimizer_only, 0", "no_shard, 0", "hybrid_shard, 2"})
    void communicationEqualsWhatTheRuntimeCounts(String strategy, int shardGroup) {
        TrainConfig c = TrainConfig.builder().preset("tiny").fsdp(f -> f.worldSize(4).strategy(ShardingStrategy.parse(strategy)))
                .fsdp(f -> f.shardGroupSize(shardGroup)).batchSize(4).seqLen(16).steps(1).fsdp(f -> f.device("cpu").cpuThreads(1)).build();
        Plan plan = new Planner().plan(c.planInput());
        long measured;
        try (Trainer t = new Trainer(c, line -> { })) {
            measured = t.step().commBytes();
        }
        assertEquals(measured, plan.comm().total(), strategy + ": bytes one rank sent in a step");
    }

    @Test
    void theLmHeadsPaddedCopiesAreCountedOnAGpuInHalfPrecision() {
        // gpt2-124m at 8192 tokens: the logits' product holds W padded to 50264 rows and C [8192, 50264]
        // (dx's holds dlogits and W padded, as large; dW's dlogits alone)
        long expected = (50264L * 768 + 8192L * 50264) * 2;
        assertEquals(expected, Planner.headPaddingBytes(8192, 50257, 768, DType.BF16));
        assertEquals(0, Planner.headPaddingBytes(8192, 50257, 768, DType.F32), "fp32 is not padded");
        assertEquals(0, Planner.headPaddingBytes(8192, 50304, 768, DType.BF16), "a vocabulary on the grid");
        assertEquals(0, Planner.headPaddingBytes(16, 50257, 768, DType.BF16), "too small to pay");
    }

    @Test
    void theEstimateCountsTheWorkspaceOfTheBackendItRunsOn() {
        TrainConfig c = TrainConfig.builder().preset("gpt2-124m").batchSize(8).seqLen(1024).fsdp(f -> f.paramDtype(DType.BF16))
                .steps(1).build();
        long onGpu = new Planner().estimate(c.planInput(), true).peakBytesPerRank();
        long onCpu = new Planner().estimate(c.planInput(), false).peakBytesPerRank();
        // the GPU pads the head's products (HalfGemmPadding); the CPU widens the largest half weight and
        // its gradient to fp32 for OpenBLAS (wte, 50257 x 768)
        long padding = Planner.headPaddingBytes(8192, 50257, 768, DType.BF16);
        long widening = 2L * 4 * 50257 * 768;
        assertEquals(padding - widening, onGpu - onCpu);
    }
}
