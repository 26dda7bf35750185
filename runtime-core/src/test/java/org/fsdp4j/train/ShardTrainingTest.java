// Training from token shards (train --data DIR): batches are the stream's consecutive B·T+1
// windows, so N ranks' row slices are disjoint and together the one-rank stream (N = 1, 2, 4);
// the position goes into the checkpoint, so a run resumed at another world size continues the
// exact stream (its losses are the uninterrupted run's); a model whose vocabulary does not cover
// the tokenizer's is refused before the first step.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.fsdp4j.api.Batch;
import org.fsdp4j.checkpoint.CheckpointIndex;
import org.fsdp4j.checkpoint.CheckpointReader;
import org.fsdp4j.checkpoint.Checkpointer;
import org.fsdp4j.data.DocumentEncoder;
import org.fsdp4j.data.ShardWriter;
import org.fsdp4j.data.StreamSampler;
import org.fsdp4j.data.TestTokenizers;
import org.fsdp4j.data.TokenShards;
import org.fsdp4j.data.Tokenizer;
import org.fsdp4j.model.DecoderModel;
import org.fsdp4j.model.GptConfig;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShardTrainingTest {

    private static final GptConfig MODEL = new GptConfig(50257, 16, 1, 2, 16);
    private static final int B = 4;
    private static final int T = 16;
    private static final int STEPS = 6;
    private static final int SAVED_AT = 3;

    @TempDir
    static Path dir;
    static Path tokenizer;
    static Path shards;
    static int[] stream;

    @BeforeAll
    static void writeShards() throws IOException {
        tokenizer = TestTokenizers.gpt2(dir);
        Tokenizer t = Tokenizer.load(tokenizer);
        stream = DocumentEncoder.encode(t, TestTokenizers.text("multilingual.txt").repeat(4));
        shards = dir.resolve("shards");
        Files.createDirectories(shards);
        try (ShardWriter w = new ShardWriter(shards, "train", t.vocabSize(), 100)) {   // windows cross shard ends
            w.write(stream);
        }
    }

    private static TrainConfig.Builder config(int worldSize) {
        return TrainConfig.builder().preset("test").model(MODEL).steps(STEPS).batchSize(B).seqLen(T).dataFile(shards)
                .fsdp(f -> f.lr(3e-3f).seed(7).device("cpu").cpuThreads(1).worldSize(worldSize));
    }

    @Test
    void ranksTakeDisjointWindowsWhoseUnionIsTheOneRankStream() {
        for (int n : List.of(1, 2, 4)) {
            StreamSampler s = new StreamSampler(TokenShards.open(shards, "train"), B, T, MODEL.vocabSize());
            int[] seen = new int[STEPS * B * T];
            int at = 0;
            for (int step = 0; step < STEPS; step++) {
                Batch b = s.next();
                int[] tokens = b.field(DecoderModel.TOKENS).ints();
                int[] targets = b.field(DecoderModel.TARGETS).ints();
                for (int rank = 0; rank < n; rank++) {          // the rows rank r is given: [r B/N, (r+1) B/N)
                    for (int row = rank * B / n; row < (rank + 1) * B / n; row++) {
                        System.arraycopy(tokens, row * T, seen, at, T);
                        at += T;
                        assertEquals(stream[step * B * T + row * T + T], targets[row * T + T - 1], "the next token is the target");
                    }
                }
            }
            assertArrayEquals(Arrays.copyOf(stream, STEPS * B * T), seen, n + " ranks");
        }
    }

    @Test
    void theStreamStartsOverWhenABatchNoLongerFits() {
        StreamSampler s = new StreamSampler(TokenShards.open(shards, "train"), B, T, MODEL.vocabSize());
        int perEpoch = (stream.length - 1) / (B * T);
        s.skip(perEpoch);
        assertEquals((long) perEpoch * B * T, s.position());
        assertArrayEquals(Arrays.copyOf(stream, B * T), s.next().field(DecoderModel.TOKENS).ints(), "batch 1 again");
    }

    @Test
    void aResumeAtAnotherWorldSizeContinuesTheExactStream() throws IOException {
        Path saves = dir.resolve("saves");
        float[] uninterrupted;
        try (Trainer t = new Trainer(config(2).build(), new CheckpointOptions(SAVED_AT, Optional.of(saves), 5,
                Optional.empty()), line -> { })) {
            uninterrupted = t.run(r -> { }).losses();
        }
        Path step3 = Checkpointer.complete(saves).get(0);
        try (CheckpointReader r = CheckpointReader.open(step3)) {
            assertEquals(Long.valueOf((long) SAVED_AT * B * T), r.index().data().tokenPosition());
        }
        for (int n : List.of(1, 4)) {
            float[] losses;
            try (Trainer t = new Trainer(config(n).build(), new CheckpointOptions(0, Optional.empty(), 1,
                    Optional.of(step3.toString())), line -> { })) {
                losses = t.run(r -> { }).losses();
            }
            for (int i = SAVED_AT; i < STEPS; i++) {
                assertEquals(uninterrupted[i], losses[i], 1e-4 * uninterrupted[i], "N = " + n + ", step " + (i + 1));
            }
        }
        // the same checkpoint with its position set back to the stream's start: other data, other losses
        String saved = "\"token_position\" : " + SAVED_AT * B * T;
        Path rewound = copyWithIndex(step3, "rewound", json -> {
            assertTrue(json.contains(saved), json);
            return json.replace(saved, "\"token_position\" : 0");
        });
        try (Trainer t = new Trainer(config(2).build(), new CheckpointOptions(0, Optional.empty(), 1,
                Optional.of(rewound.toString())), line -> { })) {
            float[] losses = t.run(r -> { }).losses();
            assertNotEquals(uninterrupted[SAVED_AT], losses[SAVED_AT], 1e-3 * uninterrupted[SAVED_AT]);
        }
    }

    /** A checkpoint written before streams were read in order has no token_position: the stream skips step batches. */
    @Test
    void aCheckpointWithoutAPositionContinuesAfterItsStepsBatches() throws IOException {
        Path saves = dir.resolve("old");
        float[] uninterrupted;
        try (Trainer t = new Trainer(config(1).build(), new CheckpointOptions(SAVED_AT, Optional.of(saves), 5,
                Optional.empty()), line -> { })) {
            uninterrupted = t.run(r -> { }).losses();
        }
        Path old = copyWithIndex(Checkpointer.complete(saves).get(0), "no-position",
                json -> json.replaceAll(",\\s*\"token_position\" : \\d+", ""));
        assertTrue(!Files.readString(old.resolve(CheckpointIndex.FILE_NAME)).contains("token_position"));
        try (CheckpointReader r = CheckpointReader.open(old)) {
            assertNull(r.index().data().tokenPosition());
        }
        try (Trainer t = new Trainer(config(2).build(), new CheckpointOptions(0, Optional.empty(), 1,
                Optional.of(old.toString())), line -> { })) {
            float[] losses = t.run(r -> { }).losses();
            for (int i = SAVED_AT; i < STEPS; i++) {
                assertEquals(uninterrupted[i], losses[i], 1e-4 * uninterrupted[i], "step " + (i + 1));
            }
        }
    }

    /** A copy of {@code checkpoint} named {@code name} whose index.json is {@code edit}ed. */
    private static Path copyWithIndex(Path checkpoint, String name, java.util.function.UnaryOperator<String> edit)
            throws IOException {
        Path copy = dir.resolve(name);
        Files.createDirectories(copy);
        try (var files = Files.list(checkpoint)) {
            for (Path f : files.toList()) {
                Files.copy(f, copy.resolve(f.getFileName()));
            }
        }
        Path index = copy.resolve(CheckpointIndex.FILE_NAME);
        Files.writeString(index, edit.apply(Files.readString(index)));
        return copy;
    }

    @Test
    void theByteLevelDataKeepsNoStreamPosition() throws IOException {
        Path saves = dir.resolve("bytes");
        try (Trainer t = new Trainer(TrainConfig.builder().preset("test").model(new GptConfig(256, 16, 1, 2, 16)).steps(1)
                .batchSize(B).seqLen(T).fsdp(f -> f.device("cpu").cpuThreads(1)).build(),
                new CheckpointOptions(1, Optional.of(saves), 1, Optional.empty()), line -> { })) {
            t.run(r -> { });
        }
        try (CheckpointReader r = CheckpointReader.open(Checkpointer.complete(saves).get(0))) {
            assertNull(r.index().data().tokenPosition());
            assertTrue(Files.readString(r.dir().resolve(CheckpointIndex.FILE_NAME)).contains("\"token_position\""));
        }
    }

    @Test
    void aModelSmallerThanTheTokenizersVocabularyIsRefusedBeforeTheFirstStep() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new Trainer(config(1)
                .model(MODEL.withVocab(50000)).tokenizer(tokenizer).build(), new CheckpointOptions(0, Optional.empty(), 1,
                Optional.empty()), line -> { }));
        assertEquals("the tokenizer has 50257 tokens but the test model's vocabulary has 50000 (tokenizer.json of gpt2"
                + " (50257 tokens)): give the model the tokenizer's vocabulary (--vocab 50257, or a --model-config with its"
                + " vocab_size)", e.getMessage());
    }
}
