// `train --data DIR` on the shards `data tokenize` wrote, and `train --data FILE --tokenizer T`:
// two processes (fsdp4j launch) train exactly as two in-process ranks on the same windows, the
// run header names the data and the tokenizer, and a model whose vocabulary does not cover the
// tokenizer's is refused in one line naming both numbers and the flag that fixes it.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.fsdp4j.data.TestTokenizers;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TrainFromShardsCommandTest {

    /** A one-layer, 32-wide GPT over GPT-2's vocabulary: a child JVM trains it in a second or two. */
    private static final List<String> RUN = List.of("train", "--device", "cpu", "--preset", "tiny", "--layers", "1",
            "--hidden", "32", "--heads", "2", "--vocab", "50257", "--batch-size", "4", "--seq-len", "32",
            "--cpu-threads", "2", "--collective-timeout", "30");

    @TempDir
    Path dir;

    Path gpt2;
    Path text;

    @BeforeEach
    void data() throws IOException {
        gpt2 = TestTokenizers.gpt2(dir);
        text = Files.writeString(dir.resolve("text.txt"), TestTokenizers.text("multilingual.txt").repeat(6));
    }

    @Test
    void twoProcessesTrainOnShardsExactlyAsTwoInProcessRanks() throws Exception {
        Path shards = dir.resolve("shards");
        CliRunner.Result t = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", shards.toString(),
                "--val-fraction", "0", "--shard-tokens", "300", text.toString());
        assertEquals(0, t.exitCode(), t.err());

        Path inProcess = dir.resolve("in-process");
        CliRunner.Result local = CliRunner.run(MultiProcessCommandTest.args(RUN, "--steps", "3", "--world-size", "2", "--data",
                shards.toString(), "--out", inProcess.toString()).toArray(String[]::new));
        assertEquals(0, local.exitCode(), local.err());
        assertTrue(local.out().contains("shards " + shards + "/train_*.bin ("), local.out());

        Path launched = dir.resolve("launched");
        ChildJvm launcher = ChildJvm.start(dir.resolve("launch.err"), Map.of(), MultiProcessCommandTest.args(
                List.of("launch", "--standalone", "--nproc-per-node", "2", "--"), MultiProcessCommandTest.args(RUN,
                        "--steps", "3", "--world-size", "2", "--data", shards.toString(), "--out", launched.toString()).toArray(String[]::new)));
        assertEquals(0, launcher.exit(120), launcher.stderr());
        assertArrayEquals(MultiProcessCommandTest.losses(inProcess.resolve("summary.json")),
                MultiProcessCommandTest.losses(launched.resolve("summary.json")), "2 processes x 1 rank");
    }

    @Test
    void checkpointInspectShowsTheStreamPosition() {
        Path saves = dir.resolve("saves");
        CliRunner.Result r = CliRunner.run(MultiProcessCommandTest.args(RUN, "--data", text.toString(), "--tokenizer",
                gpt2.toString(), "--steps", "2", "--save-every", "2", "--save-dir", saves.toString()).toArray(String[]::new));
        assertEquals(0, r.exitCode(), r.err());
        CliRunner.Result i = CliRunner.run("checkpoint", "inspect", saves.toString());
        assertEquals(0, i.exitCode(), i.err());
        assertTrue(i.out().contains("batch 4 x 32), at token 256 of the stream\n"),
                i.out());
    }

    @Test
    void aTextFileIsTokenizedOnTheFly() {
        CliRunner.Result r = CliRunner.run(MultiProcessCommandTest.args(RUN, "--data", text.toString(), "--tokenizer",
                gpt2.getParent().toString(), "--steps", "1").toArray(String[]::new));
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("file " + text + " (") && r.out().contains("tokenizer.json of gpt2 (50257 tokens)"), r.out());
    }

    @Test
    void aModelWhoseVocabularyIsSmallerThanTheTokenizersIsRefused() {
        CliRunner.Result r = CliRunner.run("train", "--device", "cpu", "--preset", "tiny", "--steps", "1", "--data",
                text.toString(), "--tokenizer", gpt2.toString());
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode());
        assertEquals("error: the tokenizer has 50257 tokens but the tiny model's vocabulary has 256 (tokenizer.json of gpt2"
                + " (50257 tokens)): give the model the tokenizer's vocabulary (--vocab 50257, or a --model-config with its"
                + " vocab_size)\n", r.err());
    }

    @Test
    void theValidationLossIsMeasuredOnTheValShardsOrTheFilesLastPart() throws IOException {
        Path shards = dir.resolve("shards");
        CliRunner.Result t = CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", shards.toString(),
                "--val-fraction", "0.2", text.toString());
        assertEquals(0, t.exitCode(), t.err());
        Path out = dir.resolve("out");
        CliRunner.Result r = CliRunner.run(MultiProcessCommandTest.args(RUN, "--data", shards.toString(), "--steps", "4",
                "--eval-every", "2", "--eval-batches", "2", "--out", out.toString()).toArray(String[]::new));
        assertEquals(0, r.exitCode(), r.err());
        List<String> evaluated = Files.readAllLines(out.resolve("metrics.jsonl")).stream()
                .filter(l -> l.contains("\"val_loss\"")).toList();
        assertEquals(2, evaluated.size(), "steps 2 and 4: " + evaluated);

        Path trainOnly = dir.resolve("train-only");
        assertEquals(0, CliRunner.run("data", "tokenize", "--tokenizer", gpt2.toString(), "--out", trainOnly.toString(),
                "--val-fraction", "0", text.toString()).exitCode());
        CliRunner.Result none = CliRunner.run(MultiProcessCommandTest.args(RUN, "--data", trainOnly.toString(), "--steps",
                "2", "--eval-every", "2").toArray(String[]::new));
        assertEquals(1, none.exitCode(), none.err());
        assertEquals("error: folder " + trainOnly + " holds no val_*.bin shards for --eval-every: tokenize with fsdp4j"
                + " data tokenize --val-fraction F (F > 0), or train without --eval-every\n", none.err());

        CliRunner.Result file = CliRunner.run(MultiProcessCommandTest.args(RUN, "--data", text.toString(), "--tokenizer",
                gpt2.toString(), "--steps", "2", "--eval-every", "2", "--eval-batches", "1").toArray(String[]::new));
        assertEquals(0, file.exitCode(), file.err());
        assertTrue(file.out().contains("tokens held out for the validation loss") && file.out().contains("| val "),
                file.out());
    }
}
