// The trainer's validation loss (--eval-every K --eval-batches M): measured after the steps
// K divides and only there, falling as the model learns the embedded Markov source, on a held-out
// split that leaves the training itself untouched (the same training losses with and without it),
// the same at every world size; the held-out part of a --data file, and the flags' checks.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import org.fsdp4j.checkpoint.Checkpointer;
import org.fsdp4j.data.HeldOut;
import org.fsdp4j.data.MarkovSource;
import org.fsdp4j.data.TokenCorpus;
import org.fsdp4j.model.GptConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TrainerEvalTest {

    /** Byte vocabulary, a short context, one narrow block: fast enough for 30 steps at two ranks. */
    private static final GptConfig SMALL = new GptConfig(256, 32, 1, 2, 32);
    private static final long SEED = System.nanoTime();

    private static TrainConfig.Builder config(int steps, int ranks) {
        return TrainConfig.builder().preset("test").model(SMALL).steps(steps).batchSize(4).seqLen(32)
                .fsdp(f -> f.lr(3e-3f).seed(SEED).device("cpu").worldSize(ranks).cpuThreads(ranks));
    }

    private static TrainSummary train(TrainConfig config, List<StepResult> results) {
        try (Trainer trainer = new Trainer(config, line -> { })) {
            return trainer.run(results::add);
        }
    }

    @Test
    void measuredOnEverySecondStepAndFallingOnTheEmbeddedSource() {
        List<StepResult> results = new ArrayList<>();
        TrainSummary s = train(config(30, 2).evalEvery(2).evalBatches(2).build(), results);
        List<TrainSummary.ValLoss> val = s.valLosses();
        assertEquals(15, val.size());
        for (StepResult r : results) {
            assertEquals(r.step() % 2 == 0, r.evaluated(), "step " + r.step());
        }
        for (int i = 0; i < val.size(); i++) {
            assertEquals(2 * (i + 1), val.get(i).step());
            assertEquals(val.get(i).valLoss(), results.get(2 * i + 1).valLoss(), 0f);
        }
        float first = val.get(0).valLoss();
        float last = val.get(val.size() - 1).valLoss();
        assertEquals(last, s.finalValLoss(), 0f);
        assertTrue(s.data().contains("validation: a separate " + HeldOut.EMBEDDED_VALIDATION_BYTES + "-byte trajectory"),
                s.data());
        // from ln 256 ≈ 5.55 (a model that knows nothing) toward the chain's entropy rate ≈ 1 nat
        assertTrue(first < Math.log(256) + 0.2 && last < first - 1.0, "validation losses " + val + " (seed " + SEED + ")");
        assertTrue(last > MarkovSource.standard().entropyRateNats(), "below the floor: " + last);
    }

    @Test
    void leavesTheTrainingAloneAndIsTheSameAtEveryWorldSize() {
        TrainSummary without = train(config(6, 1).build(), new ArrayList<>());
        TrainSummary one = train(config(6, 1).evalEvery(1).evalBatches(3).build(), new ArrayList<>());
        TrainSummary two = train(config(6, 2).evalEvery(1).evalBatches(3).build(), new ArrayList<>());
        assertNull(without.valLosses());
        assertNull(without.finalValLoss());
        assertArrayEquals(without.losses(), one.losses(), "the validation loss changed the training (seed " + SEED + ")");
        assertEquals(6, one.valLosses().size());
        for (int i = 0; i < 6; i++) {
            // the ranks sum their losses in another order, and the parameters differ by a few steps' rounding
            assertEquals(one.valLosses().get(i).valLoss(), two.valLosses().get(i).valLoss(), 1e-3,
                    "step " + (i + 1) + " at N = 1 and 2 (seed " + SEED + ")");
        }
    }

    /**
     * A run saved at step 4 and resumed keeps the schedule (steps 3 and 6 of K = 3, not the 3rd
     * step the resumed process runs) and measures the values the uninterrupted run measured.
     */
    @Test
    void aResumedRunKeepsTheSchedule(@TempDir Path dir) {
        TrainConfig config = config(6, 2).evalEvery(3).evalBatches(2).build();
        Path saves = dir.resolve("saves");
        TrainSummary whole;
        try (Trainer t = new Trainer(config, new CheckpointOptions(4, Optional.of(saves), 5, Optional.empty()), line -> { })) {
            whole = t.run(r -> { });
        }
        Path at4 = Checkpointer.complete(saves).stream().filter(p -> p.getFileName().toString().endsWith("00000004"))
                .findFirst().orElseThrow();
        List<StepResult> results = new ArrayList<>();
        try (Trainer t = new Trainer(config, new CheckpointOptions(0, Optional.empty(), 1, Optional.of(at4.toString())),
                line -> { })) {
            TrainSummary resumed = t.run(results::add);
            assertEquals(List.of(5, 6), results.stream().map(StepResult::step).toList());
            assertEquals(List.of(false, true), results.stream().map(StepResult::evaluated).toList());
            assertEquals(List.of(new TrainSummary.ValLoss(6, whole.finalValLoss())), resumed.valLosses(),
                    "the uninterrupted run's " + whole.valLosses() + " (seed " + SEED + ")");
        }
    }

    @Test
    void aDataFileHoldsOutItsLastPart(@TempDir Path dir) throws Exception {
        byte[] bytes = new byte[10_000];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) ('a' + i % 7);
        }
        bytes[bytes.length - 1] = 'z';
        HeldOut split = HeldOut.lastPartOf(TokenCorpus.of("file f", bytes, OptionalDouble.empty()), 32);
        assertEquals(9_500, split.train().length());
        assertEquals(500, split.validation().length());
        assertEquals('z', split.validation().token(499));
        assertTrue(split.train().description().endsWith("its last 500 bytes held out for the validation loss"),
                split.train().description());
        HeldOut small = HeldOut.lastPartOf(TokenCorpus.of("file g", new byte[100], OptionalDouble.empty()), 32);
        assertEquals(33, small.validation().length(), "at least one window of T + 1 bytes");
        var tooShort = assertThrows(IllegalArgumentException.class,
                () -> HeldOut.lastPartOf(TokenCorpus.of("file h", new byte[60], OptionalDouble.empty()), 32));
        assertEquals("file h is too short to hold out a validation window of 33 bytes and train on another: use a"
                + " longer file, a shorter --seq-len, or no --eval-every", tooShort.getMessage());

        Path file = dir.resolve("data.txt");
        Files.write(file, bytes);
        try (Trainer without = new Trainer(config(1, 1).dataFile(file).build(), line -> { });
             Trainer with = new Trainer(config(1, 1).dataFile(file).evalEvery(1).build(), line -> { })) {
            assertEquals("file " + file + " (10000 bytes, byte-level)", without.info().data(), "held out only when asked");
            assertEquals("file " + file + " (10000 bytes, byte-level); its last 500 bytes held out for the validation loss",
                    with.info().data());
        }
    }

    @Test
    void theFlagsAreChecked() {
        assertEquals(TrainConfig.Builder.DEFAULT_EVAL_BATCHES, config(4, 1).evalEvery(2).build().evalBatches());
        assertEquals(0, config(4, 1).build().evalBatches());
        assertEquals("--eval-every must be at least 0 (0 measures no validation loss), got -1",
                assertThrows(IllegalArgumentException.class, () -> config(4, 1).evalEvery(-1).build()).getMessage());
        assertEquals("--eval-batches 3 needs --eval-every K: the validation loss is measured only every K steps",
                assertThrows(IllegalArgumentException.class, () -> config(4, 1).evalBatches(3).build()).getMessage());
        assertEquals("--eval-batches must be at least 1, got 0",
                assertThrows(IllegalArgumentException.class, () -> config(4, 1).evalEvery(2).evalBatches(0).build())
                        .getMessage());
        TrainConfig c = config(4, 1).evalEvery(3).evalBatches(2).build();
        assertEquals(c, c.toBuilder().build());
        assertTrue(c.evaluatesAfter(3) && c.evaluatesAfter(6) && !c.evaluatesAfter(4));
    }
}
