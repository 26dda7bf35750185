// The trainer at one rank (the engine at N = 1): repeatable from its seed, learns the Markov source, reports the true
// global gradient norm and the memory the model of docs/ARCHITECTURE.md ("Memory per rank") predicts for one unsharded rank.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.fsdp4j.data.MarkovSource;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.optim.GradientClipping;
import org.junit.jupiter.api.Test;

class TrainerTest {

    /** Byte vocabulary, a short context, one narrow block: fast enough for many steps in CI. */
    private static final GptConfig SMALL = new GptConfig(256, 32, 1, 2, 32);
    private static final long SEED = System.nanoTime();

    private static TrainConfig.Builder config(int steps) {
        return TrainConfig.builder().preset("test").model(SMALL).steps(steps).batchSize(4).seqLen(32)
                .fsdp(f -> f.lr(3e-3f).seed(SEED).device("cpu").cpuThreads(1));
    }

    private static TrainSummary train(TrainConfig config, List<StepResult> results) {
        try (Trainer trainer = new Trainer(config, line -> { })) {
            return trainer.run(results::add);
        }
    }

    @Test
    void sameSeedSameRunOtherSeedOtherRun() {
        TrainSummary a = train(config(5).build(), new ArrayList<>());
        TrainSummary b = train(config(5).build(), new ArrayList<>());
        TrainSummary c = train(config(5).fsdp(f -> f.seed(SEED + 1)).build(), new ArrayList<>());
        assertArrayEquals(a.losses(), b.losses(), "seed " + SEED);
        assertFalse(Arrays.equals(a.losses(), c.losses()), "seeds " + SEED + " and " + (SEED + 1));
    }

    @Test
    void learnsTheMarkovSource() {
        List<StepResult> results = new ArrayList<>();
        TrainSummary s = train(config(150).build(), results);
        double floor = MarkovSource.standard().entropyRateNats();
        assertEquals(floor, s.lossFloor(), 0.0);
        // A freshly initialised model (weights ~ N(0, 0.02)) predicts nearly uniformly over 256 bytes.
        assertEquals(Math.log(256), s.losses()[0], 0.1, "seed " + SEED);
        // 150 steps of 128 tokens learn most of the 24-state transition table: well below the
        // unigram entropy of the source (≥ 2.5 nats for these 24 letters) and within 1 nat of the floor.
        assertTrue(s.tailLossMean() < floor + 1.0, "tail loss " + s.tailLossMean() + " vs floor " + floor
                + " (seed " + SEED + ")");
        assertEquals(150, results.size());
        for (int i = 0; i < results.size(); i++) {
            StepResult r = results.get(i);
            assertEquals(i + 1, r.step());
            assertEquals(s.losses()[i], r.loss());
            assertTrue(r.timeMs() > 0 && r.tokensPerSecond() > 0 && Double.isFinite(r.gradNorm()));
            assertEquals(r.peakBytes(), r.peakSplit().values().stream().mapToLong(Long::longValue).sum(),
                    "the split of the peak by category sums to it");
        }
    }

    @Test
    void reportsTheGlobalGradientNormAndOnePersistentCopyOfEverything() {
        TrainConfig config = config(1).fsdp(f -> f.maxGradNorm(0f)).build();
        try (Trainer trainer = new Trainer(config, line -> { })) {
            StepResult r = trainer.step();
            // Gradients stay in place until the next step zeroes them: recompute the norm in fp64
            // from the one rank's shards (whole units at N = 1; their padding is zero).
            double sumOfSquares = ((org.fsdp4j.fsdp.LocalShardedModel) ((EngineStepExecutor) trainer.executor()).model()).group().onEachRank((rank, engine) -> {
                double sq = 0;
                for (int u = 0; u < engine.layouts().size(); u++) {
                    for (float g : engine.shard(u).grad()) {
                        sq += (double) g * g;
                    }
                }
                return sq;
            }).get(0);
            assertEquals(Math.sqrt(sumOfSquares), r.gradNorm(), 1e-5 * Math.sqrt(sumOfSquares), "seed " + SEED);

            TrainSummary s = trainer.summary();
            long params = SMALL.parameterCount();
            assertEquals(params, s.params());
            // One rank, fp32 AdamW: 4 bytes each of parameter, gradient, m and v, for every parameter
            // plus the flat layout's 16-byte alignment padding (P′).
            long padded = s.paddedParams();
            assertTrue(padded >= params && padded < params + 4L * 64, padded + " vs " + params);
            assertArrayEquals(new long[] {16 * padded}, s.persistentBytesPerRank());
            assertEquals(4 * padded, s.peakBytesByCategory().get("params")[0]);
            assertEquals(8 * padded, s.peakBytesByCategory().get("optimizer")[0]);
            assertTrue(s.peakBytesByCategory().get("activations")[0] > 0, "the forward's activations are tracked");
            assertTrue(s.peakBytesPerRank()[0] > s.persistentBytesPerRank()[0],
                    "peak includes the activations on top of the persistent state");
        }
    }

    @Test
    void clippingScaleBringsTheNormDownToTheLimit() {
        assertEquals(1f, GradientClipping.scale(0.5, 1f));
        assertEquals(1f, GradientClipping.scale(50, 0f), "0 turns clipping off");
        double norm = 3 + 100 * Math.random();
        assertEquals(0.7, norm * GradientClipping.scale(norm, 0.7f), 1e-6);
    }
}
