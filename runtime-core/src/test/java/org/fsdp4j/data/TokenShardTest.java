// Shards round-trip through ShardWriter and TokenShards in llm.c's exact byte layout (checked
// against a header built here by hand, not by TokenShard), across shard boundaries, in both token
// widths; every malformed file is refused in one line naming it.
package org.fsdp4j.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenShardTest {

    @TempDir
    Path dir;

    /** An llm.c shard built byte by byte: [256] int32 header (magic, version, count), then the tokens. */
    private static byte[] llmcShard(int magic, int version, int[] tokens, int width) {
        ByteBuffer b = ByteBuffer.allocate(1024 + tokens.length * width).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(magic).putInt(version).putInt(tokens.length);
        b.position(1024);
        for (int t : tokens) {
            if (width == 2) {
                b.putShort((short) t);
            } else {
                b.putInt(t);
            }
        }
        return b.array();
    }

    @Test
    void gpt2SizedVocabulariesWriteLlmcsUint16Layout() throws IOException {
        int[] tokens = {50256, 15496, 995, 0, 65535 % 50257, 50256};
        try (ShardWriter w = new ShardWriter(dir, "train", 50257, 100)) {
            w.write(tokens);
        }
        Path shard = dir.resolve("train_000000.bin");
        assertArrayEquals(llmcShard(20240520, 1, tokens, 2), Files.readAllBytes(shard));
        TokenShard s = TokenShard.open(shard);
        assertEquals(6, s.size());
        assertEquals(2, s.tokenBytes());
        assertEquals(50256, s.get(0));
    }

    @Test
    void vocabulariesAbove65536WriteLlama3sUint32Layout() throws IOException {
        int[] tokens = {128000, 9906, 1917, 128255, 70000};
        try (ShardWriter w = new ShardWriter(dir, "val", 128256, 100)) {
            w.write(tokens);
        }
        Path shard = dir.resolve("val_000000.bin");
        assertArrayEquals(llmcShard(20240801, 7, tokens, 4), Files.readAllBytes(shard));
        int[] back = new int[5];
        TokenShards.open(dir, "val").read(0, back, 0, 5);
        assertArrayEquals(tokens, back);
    }

    @Test
    void aStreamSplitsIntoBoundedShardsAndReadsBackAcrossThem() {
        int[] tokens = new Random(7).ints(2500, 0, 50257).toArray();
        try (ShardWriter w = new ShardWriter(dir, "train", 50257, 1000)) {
            w.write(tokens, 0, 1234);
            w.write(tokens, 1234, tokens.length - 1234);
            assertEquals(2500, w.tokens());
        }
        TokenShards s = TokenShards.open(dir, "train");
        assertEquals(List.of(1000L, 1000L, 500L), s.shards().stream().map(TokenShard::size).toList());
        assertEquals(List.of("train_000000.bin", "train_000001.bin", "train_000002.bin"),
                s.shards().stream().map(x -> x.file().getFileName().toString()).toList());
        assertEquals(2500, s.size());
        int[] back = new int[2500];
        s.read(0, back, 0, 2500);
        assertArrayEquals(tokens, back);
        int[] window = new int[1100];                   // from inside the first shard to inside the third
        s.read(950, window, 0, 1100);
        assertArrayEquals(java.util.Arrays.copyOfRange(tokens, 950, 2050), window);
        assertThrows(IndexOutOfBoundsException.class, () -> s.read(2000, new int[501], 0, 501));
    }

    @Test
    void anAbortedWriterLeavesNothingBehind() throws IOException {
        ShardWriter w = new ShardWriter(dir, "train", 50257, 1000);
        w.write(new Random(3).ints(2500, 0, 50257).toArray());
        assertEquals(2, w.shards().size());
        w.abort();
        w.close();                                          // nothing left to finish
        try (var files = Files.list(dir)) {
            assertEquals(List.of(), files.toList());
        }
    }

    @Test
    void theWriterRefusesIdsBeyondItsVocabularyAndShardsOver2GiB() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> {
            try (ShardWriter w = new ShardWriter(dir, "train", 50257, 100)) {
                w.write(new int[] {1, 50257});
            }
        });
        assertTrue(e.getMessage().startsWith("token 50257 is beyond the vocabulary of 50257 tokens"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new ShardWriter(dir, "train", 50257, 1L << 30));
        assertEquals("shard size 1073741824 tokens is out of range: give 1 to 1073741311 tokens (2-byte tokens, a shard"
                + " is mapped whole and so is at most 2 GiB)", e.getMessage());
    }

    @Test
    void malformedShardsAreRefusedInOneLine() throws IOException {
        int[] tokens = {1, 2, 3};
        Path truncated = Files.write(dir.resolve("a.bin"), java.util.Arrays.copyOf(llmcShard(20240520, 1, tokens, 2), 1028));
        Path magic = Files.write(dir.resolve("b.bin"), llmcShard(20240521, 1, tokens, 2));
        Path version = Files.write(dir.resolve("c.bin"), llmcShard(20240801, 1, tokens, 4));
        Path tiny = Files.write(dir.resolve("d.bin"), new byte[100]);
        assertEquals("token shard " + truncated + " has 1028 bytes but its header says 3 tokens of 2 bytes (1030 bytes):"
                + " it is truncated or was written with another layout: give files written by fsdp4j data tokenize or"
                + " llm.c's preprocessing", assertThrows(IllegalArgumentException.class, () -> TokenShard.open(truncated)).getMessage());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> TokenShard.open(magic)).getMessage()
                .startsWith("token shard " + magic + " has magic 20240521, not 20240520 or 20240801"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> TokenShard.open(version)).getMessage()
                .startsWith("token shard " + version + " has version 1 for magic 20240801 (uint32 tokens), not 7"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> TokenShard.open(tiny)).getMessage()
                .startsWith("token shard " + tiny + " has 100 bytes, less than the 1024-byte header"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> TokenShards.open(dir, "train")).getMessage()
                .startsWith("folder " + dir + " holds no train_*.bin token shards"));
    }
}
