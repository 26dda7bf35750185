// A run ends at a step whose loss or gradients are not finite (or skips a bounded number of them
// under --on-nonfinite skip), treats fp16 gradient overflows as the loss scaler's business, ends
// cleanly at the scaler's floor, stops on request, and its summary says so without ever
// writing NaN into JSON. The executor is scripted, so each case is exact; the real numerics
// are DivergenceCommandTest's (samples) and lowLrIsFineHugeLrDivergesWithTheParametersIntact.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.function.Supplier;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.LossScaleFloorException;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.fsdp.FsdpEngine;
import org.fsdp4j.metrics.JsonFiles;
import org.fsdp4j.model.GptConfig;
import org.junit.jupiter.api.Test;

class DivergenceTest {

    private static final GptConfig MODEL = new GptConfig(256, 16, 1, 2, 16);
    private static final float NAN = Float.NaN;

    /** Plays back one outcome per step (or throws what the supplier throws). */
    private static final class ScriptedExecutor implements StepExecutor {
        private final Deque<Supplier<StepMetrics>> script;
        private final MemoryTracker tracker = new MemoryTracker("scripted");

        ScriptedExecutor(List<Supplier<StepMetrics>> script) {
            this.script = new ArrayDeque<>(script);
        }

        private float lastLoss = Float.NaN;

        @Override
        public StepMetrics step(Batch batch, int step, float lr) {
            StepMetrics m = script.removeFirst().get();
            lastLoss = m.loss();
            return m;
        }

        /** The held-out loss tracks the scripted training loss. */
        @Override
        public float evaluate(Batch batch) {
            return lastLoss;
        }

        @Override
        public long parameterCount() {
            return MODEL.parameterCount();
        }

        @Override
        public int worldSize() {
            return 1;
        }

        @Override
        public String backendName() {
            return "scripted";
        }

        @Override
        public List<MemoryTracker> memoryTrackers() {
            return List.of(tracker);
        }

        @Override
        public void close() {
        }
    }

    private static Supplier<StepMetrics> ok(float loss) {
        return () -> new StepMetrics(loss, 1.0, false, 1f, 1, 0, new long[1]);
    }

    /** What an executor reports for non-finite gradients: the update was skipped. */
    private static Supplier<StepMetrics> nonFinite(float loss) {
        return () -> new StepMetrics(loss, Double.NaN, true, 1f, 1, 0, new long[1]);
    }

    private static TrainConfig.Builder config(int steps) {
        return TrainConfig.builder().preset("test").model(MODEL).steps(steps).batchSize(2).seqLen(16).fsdp(f -> f.device("cpu"));
    }

    private static TrainSummary run(TrainConfig config, List<Supplier<StepMetrics>> script,
                                    List<StepResult> steps) {
        try (Trainer trainer = new Trainer(config, line -> { }, (c, d) -> new ScriptedExecutor(script))) {
            return trainer.run(steps::add);
        }
    }

    private static void assertJsonHasNoNaN(TrainSummary s) {
        String json = JsonFiles.toJson(s);
        assertFalse(json.contains("NaN") || json.contains("Infinity"), json);
    }

    @Test
    void fp32StopsAtTheFirstNonFiniteLoss() {
        List<StepResult> steps = new ArrayList<>();
        TrainSummary s = run(config(10).build(), List.of(ok(5f), ok(4f), nonFinite(NAN), ok(3f)), steps);
        assertEquals(3, steps.size(), "the run stops at the non-finite step");
        assertEquals(3, s.steps());
        assertEquals(3, s.outcome().divergedAtStep());
        assertEquals("nonfinite_loss", s.outcome().divergence());
        assertEquals(10, s.outcome().plannedSteps());
        assertEquals(1, s.outcome().skippedSteps());
        assertFalse(s.outcome().interrupted());
        assertTrue(Float.isNaN(s.losses()[2]));
        String json = JsonFiles.toJson(s);
        assertTrue(json.replaceAll("\\s", "").contains("\"losses\":[5.0,4.0,null]"), json);
        assertTrue(json.contains("\"final_loss\" : null") && json.contains("\"diverged_at_step\" : 3"), json);
        assertJsonHasNoNaN(s);
    }

    @Test
    void finiteLossWithNonFiniteGradientsIsDivergenceInFp32ButTheScalersJobInFp16() {
        TrainSummary fp32 = run(config(4).build(), List.of(ok(5f), nonFinite(4f)), new ArrayList<>());
        assertEquals(2, fp32.outcome().divergedAtStep());
        assertEquals("nonfinite_gradients", fp32.outcome().divergence());

        TrainConfig fp16 = config(4).fsdp(f -> f.worldSize(2).paramDtype(DType.F16).reduceDtype(DType.F16)).build();
        TrainSummary s = run(fp16, List.of(nonFinite(5f), nonFinite(5f), ok(5f), nonFinite(4f)), new ArrayList<>());
        assertFalse(s.outcome().diverged(), "gradient overflows with a finite loss only lower the loss scale");
        assertEquals(4, s.steps());
        assertEquals(3, s.outcome().skippedSteps(), "every skipped step is counted");

        TrainSummary nanLoss = run(fp16, List.of(nonFinite(5f), nonFinite(NAN), ok(5f)), new ArrayList<>());
        assertEquals(2, nanLoss.outcome().divergedAtStep(), "a non-finite loss is divergence in fp16 too");
        assertEquals("nonfinite_loss", nanLoss.outcome().divergence());
        assertEquals(2, nanLoss.outcome().skippedSteps());
        assertJsonHasNoNaN(nanLoss);
    }

    @Test
    void skipPolicySkipsABoundedNumberOfStepsThenStops() {
        TrainConfig c = config(10).onNonFinite(NonFinitePolicy.parse("skip", 2)).build();
        TrainSummary s = run(c, List.of(ok(5f), nonFinite(NAN), ok(4f), nonFinite(NAN), ok(3f), nonFinite(NAN), ok(2f)),
                new ArrayList<>());
        assertEquals(6, s.outcome().divergedAtStep(), "two non-finite steps skipped, the third stops the run");
        assertEquals(3, s.outcome().skippedSteps());
        assertEquals(6, s.steps());
    }

    @Test
    void theFp16LossScalesFloorEndsTheRunAsDivergence() {
        TrainConfig fp16 = config(10).fsdp(f -> f.worldSize(2).paramDtype(DType.F16).reduceDtype(DType.F16)).build();
        // ranks wrap what they throw; the trainer finds the scaler's exception as a cause
        Supplier<StepMetrics> floor = () -> {
            throw new IllegalStateException("rank 0 failed", new LossScaleFloorException("loss scale fell below 2^-24"));
        };
        TrainSummary s = run(fp16, List.of(ok(5f), nonFinite(5f), floor), new ArrayList<>());
        assertEquals(3, s.steps());
        assertEquals(3, s.outcome().divergedAtStep());
        assertEquals("loss_scale_floor", s.outcome().divergence());
        assertEquals(2, s.outcome().skippedSteps());
        assertTrue(Float.isNaN(s.losses()[2]), "the failed step's loss is unknown");
        assertJsonHasNoNaN(s);
    }

    @Test
    void aStopRequestEndsTheRunAfterTheStepInProgress() {
        List<StepResult> steps = new ArrayList<>();
        try (Trainer trainer = new Trainer(config(10).build(), line -> { },
                (c, d) -> new ScriptedExecutor(List.of(ok(5f), ok(4f), ok(3f), ok(2f))))) {
            TrainSummary s = trainer.run(r -> {
                steps.add(r);
                if (r.step() == 2) {
                    trainer.requestStop("SIGTERM");
                }
            });
            assertEquals(2, s.steps());
            assertTrue(s.outcome().interrupted());
            assertEquals("SIGTERM", s.outcome().interruptedBy());
            assertNull(s.outcome().divergedAtStep());
            assertFalse(trainer.hasNextStep());
        }
    }

    @Test
    void aStepThatFailsIsRecordedAndTheStepsBeforeItStillSummarised() {
        Supplier<StepMetrics> oom = () -> {
            throw new OutOfMemoryError("malloc of 8 GiB failed");
        };
        try (Trainer trainer = new Trainer(config(10).build(), line -> { },
                (c, d) -> new ScriptedExecutor(List.of(ok(5f), ok(4f), oom)))) {
            org.junit.jupiter.api.Assertions.assertThrows(OutOfMemoryError.class, () -> trainer.run(r -> { }));
            TrainSummary s = trainer.summary();
            assertEquals(2, s.steps());
            assertTrue(s.outcome().failure().startsWith("step 3: java.lang.OutOfMemoryError: malloc"), s.outcome().failure());
            assertFalse(s.outcome().interrupted() || s.outcome().diverged());
            assertFalse(trainer.hasNextStep());
        }
    }

    @Test
    void aSummaryBeforeTheFirstStepHasNoNumbersToShow() {
        try (Trainer trainer = new Trainer(config(10).build(), line -> { }, (c, d) -> new ScriptedExecutor(List.of()))) {
            trainer.requestStop("SIGINT");
            TrainSummary s = trainer.summary();
            assertEquals(0, s.steps());
            assertTrue(s.outcome().interrupted());
            assertJsonHasNoNaN(s);
        }
    }

    @Test
    void hugeLrDivergesAndTheNonFiniteUpdateIsNotApplied() {
        TrainConfig c = TrainConfig.builder().preset("test").model(MODEL).steps(20).batchSize(4).seqLen(16)
                .fsdp(f -> f.lr(1e9f).seed(System.nanoTime()).device("cpu").cpuThreads(1)).build();
        try (Trainer trainer = new Trainer(c, line -> { })) {
            TrainSummary s = trainer.run(r -> { });
            assertTrue(s.outcome().diverged(), Arrays.toString(s.losses()));
            assertTrue(s.steps() < 20);
            ((org.fsdp4j.fsdp.LocalShardedModel) ((EngineStepExecutor) trainer.executor()).model()).group().onEachRank((rank, engine) -> {
                for (int u = 0; u < engine.layouts().size(); u++) {
                    FsdpEngine.ShardView v = engine.shard(u);
                    for (float x : v.master()) {
                        assertTrue(Float.isFinite(x), v.unitName() + " holds a non-finite value after the stop");
                    }
                }
                return null;
            });
        }
    }
}
