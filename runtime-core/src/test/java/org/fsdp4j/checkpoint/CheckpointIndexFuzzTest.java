// Fuzzes a checkpoint's index.json (issue 47, item 3): resume and export trust it to say where
// every value lies, and a disk error, a hand edit or a stranger's file can put anything there.
// Random and mutated indexes (keys removed, renamed, duplicated; wrong types; huge, negative or
// overflowing sizes, shapes and offsets; bit flips, truncation) must each open cleanly or be
// refused with the reader's one error, a CheckpointException naming the index; never another
// exception, an allocation of what the index claims, or a read outside the rank file. An index
// that opens must then serve every buffer of every parameter it declares.
package org.fsdp4j.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.fsdp4j.metrics.JsonFiles;
import org.fsdp4j.model.HfGpt2Config;
import org.fsdp4j.testing.Fuzz;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointIndexFuzzTest {

    private static final long SEED = 0xC4EC1DL;

    @TempDir
    Path dir;

    @Test
    void indexesOpenOrAreRefusedCleanly() throws Exception {
        ByteBuffer values = ByteBuffer.allocate(40).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 10; i++) {
            values.putFloat(i * 0.5f);
        }
        Path rank = dir.resolve("rank-00000.bin");
        Files.write(rank, values.array());
        String crc = CheckpointWriter.crc32cOf(rank);
        String valid = JsonFiles.toJson(new CheckpointIndex(CheckpointIndex.FORMAT, CheckpointIndex.FORMAT_VERSION, 3,
                new HfGpt2Config("gpt2", 2, 30, 2, 256, 32), "custom", "full_shard", 1, 1, "fp32", "fp32", "fp32",
                List.of("param"), new CheckpointIndex.OptimizerState("adamw", 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f),
                new CheckpointIndex.LossScalerState(1, 0), new CheckpointIndex.DataPosition(1, 4, 8, 4, 10),
                new float[] {3, 2.5f, 2}, List.of(new CheckpointIndex.Param("w", new long[] {2, 3}),
                new CheckpointIndex.Param("b", new long[] {4})),
                List.of(new CheckpointIndex.RankFile(rank.getFileName().toString(), 0, 0, 40, crc)),
                List.of(new CheckpointIndex.Entry("w", "param", 0, 6, "rank-00000.bin", 0),
                        new CheckpointIndex.Entry("b", "param", 0, 4, "rank-00000.bin", 24))));
        Path index = dir.resolve(CheckpointIndex.FILE_NAME);
        // a shape of 2^62 elements whose entry's 2^64 bytes would wrap to 0 and fit the 40-byte file
        Files.writeString(index, valid.replaceFirst("\\[\\s*4\\s*\\]", "[4611686018427387904]")
                .replaceFirst("\"end\"\\s*:\\s*4\\b", "\"end\" : 4611686018427387904"));
        CheckpointException huge = assertThrows(CheckpointException.class, () -> CheckpointReader.open(dir),
                Files.readString(index));
        assertTrue(huge.getMessage().contains("out of range"), huge.getMessage());
        Files.writeString(index, valid);
        try (CheckpointReader r = CheckpointReader.open(dir)) {       // the fuzzer's starting point is valid
            assertEquals(4.5f, r.full("b", "param")[3]);
        }
        Fuzz f = new Fuzz(SEED);
        int ran = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> f.run(5_000, 1_000, 4_000,
                n -> n % 10 == 0 ? new Fuzz.Input(n, "random", f.randomBytes(200)) : f.mutateJson(n, valid),
                CheckpointException.class, in -> {
                    Files.write(index, in.bytes());
                    try (CheckpointReader r = CheckpointReader.open(dir)) {
                        for (CheckpointIndex.Param p : r.index().params()) {
                            for (String b : r.index().buffers()) {
                                assertTrue(r.full(p.name(), b).length <= 10, in.describe(f.seed()));
                            }
                        }
                    }
                }), "seed " + SEED);
        assertTrue(ran >= 1_000, "seed " + SEED + ": only " + ran + " inputs");
    }
}
