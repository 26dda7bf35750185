// `fsdp4j data tokenize` end to end: GPT-2 shards whose tokens are, file by file, end-of-text then
// the text's ids (the val tail of each file in the val shards), bounded shard sizes, and the
// command's one-line failures with their exit codes.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.stream.IntStream;
import org.fsdp4j.data.DocumentEncoder;
import org.fsdp4j.data.TestTokenizers;
import org.fsdp4j.data.TokenShard;
import org.fsdp4j.data.TokenShards;
import org.fsdp4j.data.Tokenizer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DataCommandTest {

    @TempDir
    Path dir;

    Path gpt2;
    Path a;
    Path b;

    @BeforeEach
    void files() throws IOException {
        gpt2 = TestTokenizers.gpt2(dir);
        a = Files.writeString(dir.resolve("a.txt"), TestTokenizers.text("multilingual.txt").repeat(3));
        b = Files.writeString(dir.resolve("b.txt"), "Second document.\nIt has two lines and some more words in them.\n".repeat(40));
    }

    private static int[] all(TokenShards s) {
        int[] t = new int[Math.toIntExact(s.size())];
        s.read(0, t, 0, t.length);
        return t;
    }

    private static int[] concat(int[]... parts) {
        return Arrays.stream(parts).flatMapToInt(IntStream::of).toArray();
    }

    @Test
    void shardsHoldEachFilesDocumentInOrderWithItsValTailApart() throws IOException {
        Path out = dir.resolve("shards");
        CliRunner.Result r = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.getParent().toString(), "--out",
                out.toString(), "--val-fraction", "0.1", "--shard-tokens", "500", "--threads", "2", a.toString(), b.toString());
        assertEquals(0, r.exitCode(), r.err());
        Tokenizer t = Tokenizer.load(gpt2);
        String ta = Files.readString(a);
        String tb = Files.readString(b);
        int ca = DocumentEncoder.tailStart(ta, 0.1);
        int cb = DocumentEncoder.tailStart(tb, 0.1);
        int[] train = concat(DocumentEncoder.encode(t, ta.substring(0, ca)), DocumentEncoder.encode(t, tb.substring(0, cb)));
        int[] val = concat(DocumentEncoder.encode(t, ta.substring(ca)), DocumentEncoder.encode(t, tb.substring(cb)));
        assertEquals(50256, train[0]);
        TokenShards trainShards = TokenShards.open(out, "train");
        assertArrayEquals(train, all(trainShards));
        assertArrayEquals(val, all(TokenShards.open(out, "val")));
        assertTrue(trainShards.shards().size() >= 2, "500-token shards");
        for (TokenShard s : trainShards.shards()) {
            assertTrue(s.size() <= 500 && s.tokenBytes() == 2, s.file() + ": " + s.size());
        }
        assertTrue(r.out().startsWith("tokenizer tokenizer.json of gpt2 (50257 tokens), end of text 50256, uint16 tokens\n"
                + "train: " + train.length + " tokens in " + trainShards.shards().size() + " shards | val: " + val.length
                + " tokens in 1 shards | " + out + "\n2 files, "), r.out());
    }

    @Test
    void withoutAValFractionThereAreNoValShards() {
        Path out = dir.resolve("noval");
        CliRunner.Result r = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", out.toString(),
                "--val-fraction", "0", b.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(TokenShards.present(out, "train"));
        assertTrue(!TokenShards.present(out, "val"));
    }

    @Test
    void failuresAreOneLineWithTheirExitCode() throws IOException {
        Path out = dir.resolve("o");
        CliRunner.Result r = CliRunner.run("data", "tokenize", "--tokenizer", dir.resolve("none").toString(), "--out",
                out.toString(), a.toString());
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode());
        assertEquals("error: tokenizer " + dir.resolve("none") + " does not exist: give a tokenizer.json file or a folder"
                + " holding one (a Hugging Face model's folder)\n", r.err());

        r = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", out.toString(), dir.resolve("x.txt").toString());
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode());
        assertEquals("error: text file " + dir.resolve("x.txt") + " does not exist: give data tokenize the paths of UTF-8"
                + " text files\n", r.err());

        Path latin1 = Files.write(dir.resolve("latin1.txt"), new byte[] {'c', 'a', 'f', (byte) 0xe9, '\n'});
        r = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", out.toString(), latin1.toString());
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode());
        assertTrue(r.err().startsWith("error: text file " + latin1 + " is not UTF-8 text ("), r.err());
        assertEquals(1, r.err().lines().count(), r.err());

        // a run that fails part-way (a good file written first, in small shards) leaves nothing behind
        r = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", out.toString(), "--shard-tokens",
                "50", "--threads", "1", a.toString(), latin1.toString());
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode());
        try (var left = Files.list(out)) {
            assertEquals(java.util.List.of(), left.toList());
        }
        assertEquals(0, CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", out.toString(), b.toString()).exitCode());
        r = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", out.toString(), b.toString());
        assertEquals(ExitCode.OUTPUT_IN_USE.code(), r.exitCode());
        assertEquals("error: folder " + out + " already holds train_*.bin token shards: give --out a new folder, or remove them\n",
                r.err());

        r = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", out.toString(), "--val-fraction", "1", b.toString());
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode());
        assertEquals("error: --val-fraction 1.0 is out of range: give 0 (no val shards) up to, not including, 1\n", r.err());

        r = CliRunner.run("data");
        assertEquals(ExitCode.USAGE.code(), r.exitCode());
        assertEquals("error: missing command: use tokenize (see fsdp4j data --help)\n", r.err());
    }
}
