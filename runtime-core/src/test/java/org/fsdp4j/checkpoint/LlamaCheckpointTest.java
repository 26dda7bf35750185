// Checkpoints of a Llama: saved at 2 ranks, the index records the family and shape in Hugging
// Face's Llama keys; resumed at 2 ranks the run continues bit-identically, resumed at 4 (each rank's
// shards re-sliced from the 2-rank files by name and element range) the next losses match the
// uninterrupted run within fp32 tolerance; a GPT, or a Llama of another shape, is refused naming
// both models.
package org.fsdp4j.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.HfLlamaConfig;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.train.CheckpointOptions;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.Trainer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LlamaCheckpointTest {

    /** 4 query heads sharing 2 key/value heads of size 6, MLP 40: unit sizes 2 and 4 ranks split unevenly. */
    private static final LlamaConfig MODEL = new LlamaConfig(256, 32, 2, 4, 2, 24, 40, 10_000, 1e-5);
    private static final int STEPS = 12;
    private static final int SAVED_AT = 6;
    private static final int CHECKED = 3;

    @TempDir
    static Path dir;
    private static float[] uninterrupted;
    private static Path saved;

    private static TrainConfig.Builder config(int worldSize) {
        return TrainConfig.builder().preset("test").model(MODEL).steps(STEPS).batchSize(8).seqLen(32).fsdp(f -> f.lr(3e-3f))
                .fsdp(f -> f.seed(77).device("cpu").cpuThreads(1).worldSize(worldSize));
    }

    @BeforeAll
    static void uninterruptedRunAtTwoRanks() {
        Path saves = dir.resolve("saves");
        try (Trainer t = new Trainer(config(2).build(), new CheckpointOptions(SAVED_AT, Optional.of(saves), 5,
                Optional.empty()), line -> { })) {
            uninterrupted = t.run(r -> { }).losses();
        }
        saved = Checkpointer.complete(saves).get(0);
        assertTrue(saved.getFileName().toString().endsWith("00000006"), saved.toString());
    }

    private static float[] resumed(TrainConfig c, int steps) {
        List<String> log = new ArrayList<>();
        try (Trainer t = new Trainer(c, new CheckpointOptions(0, Optional.empty(), 1, Optional.of(saved.toString())),
                log::add)) {
            assertTrue(log.stream().anyMatch(l -> l.startsWith("resumed from " + saved + " at step 6")), log.toString());
            for (int i = 0; i < steps && t.hasNextStep(); i++) {
                t.step();
            }
            return t.summary().losses();
        }
    }

    @Test
    void theIndexNamesTheFamilyAndShape() {
        try (CheckpointReader reader = CheckpointReader.open(saved)) {
            assertEquals(HfLlamaConfig.of(MODEL), reader.index().model());
            assertEquals(MODEL, reader.index().model().toModelConfig());
            assertEquals(2, reader.index().worldSize());
        }
    }

    @Test
    void resumingAtTwoRanksIsBitIdenticalAndAtFourReslices() {
        float[] same = resumed(config(2).build(), STEPS);
        assertArrayEquals(Arrays.copyOfRange(uninterrupted, SAVED_AT, STEPS), Arrays.copyOfRange(same, SAVED_AT, STEPS),
                "steps 7..12 after resuming at 2 ranks (exact)");
        float[] four = resumed(config(4).build(), CHECKED);
        for (int i = SAVED_AT; i < SAVED_AT + CHECKED; i++) {
            // another shard shape sums in another fp32 order (see CheckpointResumeTest)
            assertEquals(uninterrupted[i], four[i], 1e-4 * uninterrupted[i], "N = 4, step " + (i + 1));
            System.out.printf("llama checkpoint saved at N = 2, resumed at N = 4: step %d loss %.7f vs %.7f%n", i + 1,
                    four[i], uninterrupted[i]);
        }
    }

    @Test
    void anotherFamilyOrShapeIsRefusedNamingBoth() {
        TrainConfig gpt = TrainConfig.builder().preset("test").model(new GptConfig(256, 32, 2, 4, 24)).steps(STEPS)
                .batchSize(8).seqLen(32).fsdp(f -> f.device("cpu").cpuThreads(1).worldSize(2)).build();
        CheckpointException e = assertThrows(CheckpointException.class, () -> new Trainer(gpt,
                new CheckpointOptions(0, Optional.empty(), 1, Optional.of(saved.toString())), line -> { }).close());
        assertTrue(e.getMessage().contains("a checkpoint of another model: it has --model llama, this run --model gpt;"),
                e.getMessage());
        TrainConfig wider = config(2).model(new LlamaConfig(256, 32, 2, 4, 4, 24, 40, 10_000, 1e-5)).build();
        CheckpointException w = assertThrows(CheckpointException.class, () -> new Trainer(wider,
                new CheckpointOptions(0, Optional.empty(), 1, Optional.of(saved.toString())), line -> { }).close());
        assertTrue(w.getMessage().contains("num_key_value_heads 2") && w.getMessage().contains("num_key_value_heads 4"),
                w.getMessage());
    }
}
