// ShardedModel.evaluate, the forward-only loss a run measures its held-out split with: it must
// leave the training state alone (masters, AdamW's moments, the optimizer's step count and the
// loss scale bit for bit), allocate no gradient and keep no activation or gathered unit after it
// returns, under every strategy, with activation checkpointing, micro-batches, fp16 (its loss scale)
// and bf16 with offload (whose gathers are buffers of their own, unlike fp32's in-place ones on the
// CPU: their freeing shows in the live bytes); and it must be the same number
// at every world size and the very loss the training step reports on that batch before its update.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.BATCH;
import static org.fsdp4j.fsdp.FsdpTestSupport.SEQ;
import static org.fsdp4j.fsdp.FsdpTestSupport.TINY;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Fsdp;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ShardedModel;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.model.DecoderModel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class FsdpEvaluateTest {

    private final long seed = Long.getLong("fsdp4j.testSeed", System.nanoTime());
    private final Random random = new Random(seed);

    private Batch randomBatch() {
        int[] tokens = new int[BATCH * SEQ];      // (B, T)
        int[] targets = new int[BATCH * SEQ];     // (B, T)
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = random.nextInt(TINY.vocabSize());
            targets[i] = random.nextInt(TINY.vocabSize());
        }
        return DecoderModel.batch(BATCH, SEQ, tokens, targets);
    }

    private static FsdpOptions.Builder options(int n) {
        return FsdpOptions.builder().worldSize(n).cpuThreads(n).seed(7).lr(1e-2f);
    }

    @ParameterizedTest(name = "{0}, N = {1}, checkpointing {2}, {3} micro-batches, {4}, offload {5}")
    @CsvSource({"FULL_SHARD, 2, false, 1, F32, false", "FULL_SHARD, 2, true, 2, F32, false",
            "SHARD_GRAD_OP, 2, false, 1, F32, false", "NO_SHARD, 2, true, 1, F32, false",
            "OPTIMIZER_ONLY, 2, false, 2, F32, false", "HYBRID_SHARD, 4, false, 1, F32, false",
            "FULL_SHARD, 2, false, 1, F16, false", "FULL_SHARD, 2, true, 1, BF16, true"})
    void leavesTheTrainingStateAloneAndAllocatesNoGradient(ShardingStrategy strategy, int n, boolean checkpointing,
                                                           int m, DType dtype, boolean offload) {
        FsdpOptions.Builder o = options(n).strategy(strategy).activationCheckpointing(checkpointing).microBatches(m)
                .paramDtype(dtype).offload(offload);
        if (strategy == ShardingStrategy.HYBRID_SHARD) {
            o.shardGroupSize(2);
        }
        try (ShardedModel model = Fsdp.shard(TINY.factory(), o.build())) {
            model.step(randomBatch());
            model.step(randomBatch());          // AdamW's moments and step count are not their initial values
            ShardedStateDict before = model.shardedStateDict();
            long[] liveBefore = new long[n];
            for (int r = 0; r < n; r++) {
                MemoryTracker t = model.deviceMemory().get(r);
                t.resetPeak();
                liveBefore[r] = t.liveBytes();
            }
            long[] gradsBefore = model.deviceMemory().stream().mapToLong(t -> t.liveBytes(MemoryCategory.GRADS)).toArray();

            float loss = model.evaluate(randomBatch());

            assertTrue(Float.isFinite(loss) && loss > 0, "loss " + loss + " (seed " + seed + ")");
            for (int r = 0; r < n; r++) {
                MemoryTracker t = model.deviceMemory().get(r);
                assertEquals(gradsBefore[r], t.peakBytes(MemoryCategory.GRADS), "rank " + r + ": the evaluation "
                        + "allocated gradient memory");
                assertEquals(liveBefore[r], t.liveBytes(), "rank " + r + ": the evaluation left memory behind "
                        + t.liveByCategory());
                assertEquals(0, t.liveBytes(MemoryCategory.ACTIVATIONS), "rank " + r + ": activations kept");
                assertTrue(t.peakBytes(MemoryCategory.ACTIVATIONS) > 0, "rank " + r + ": the forward ran");
            }
            ShardedStateDict after = model.shardedStateDict();
            assertEquals(before.progress(), after.progress(), "optimizer step count and loss scale");
            assertEquals(before.ranks().size(), after.ranks().size());
            for (int r = 0; r < before.ranks().size(); r++) {
                var unitsBefore = before.ranks().get(r).units();
                var unitsAfter = after.ranks().get(r).units();
                for (int u = 0; u < unitsBefore.size(); u++) {
                    for (int k = 0; k < before.bufferNames().size(); k++) {
                        assertArrayEquals(unitsBefore.get(u).buffers().get(k), unitsAfter.get(u).buffers().get(k),
                                "rank " + r + " unit " + unitsBefore.get(u).unit() + " "
                                        + before.bufferNames().get(k) + " changed");
                    }
                }
            }
        }
    }

    /**
     * The same batch from the same initial parameters at N = 1, 2 and 4: each rank's losses are
     * summed in another order at each N, so the values agree to fp32 rounding (within 1e-5
     * relative, a few ulps of a loss near ln 37); and at each N the step that follows on that batch
     * reports exactly the evaluated loss (the same forward, summed the same way), before its update.
     */
    @Test
    void sameLossAtEveryWorldSizeAndTheStepsLossBeforeItsUpdate() {
        Batch batch = randomBatch();
        Batch other = randomBatch();
        float[] evaluated = new float[3];
        float[] afterAStep = new float[3];
        int[] sizes = {1, 2, 4};
        for (int i = 0; i < sizes.length; i++) {
            try (ShardedModel model = Fsdp.shard(TINY.factory(), options(sizes[i]).build())) {
                evaluated[i] = model.evaluate(batch);
                assertEquals(evaluated[i], model.evaluate(batch), 0f, "N=" + sizes[i] + ": the same batch twice");
                assertEquals(evaluated[i], model.step(batch).loss(), 0f, "N=" + sizes[i]
                        + ": the step's loss on the evaluated batch (seed " + seed + ")");
                afterAStep[i] = model.evaluate(other);
            }
        }
        for (int i = 1; i < sizes.length; i++) {
            assertEquals(evaluated[0], evaluated[i], 1e-5f * evaluated[0], "N=" + sizes[i] + " vs N=1 (seed " + seed + ")");
            assertEquals(afterAStep[0], afterAStep[i], 1e-5f * afterAStep[0], "after a step, N=" + sizes[i]
                    + " vs N=1 (seed " + seed + ")");
        }
    }
}
