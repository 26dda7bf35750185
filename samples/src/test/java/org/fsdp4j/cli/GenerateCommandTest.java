// `fsdp4j generate`: from a short training run's checkpoint (SAVE_DIR/latest) it prints the prompt
// and generated text, the same text on two runs with the same seed (greedy and sampled); from tiny
// GPT-2-layout safetensors written by tools/reference/gpt2_generate_reference.py it reproduces
// PyTorch's greedy token ids exactly (the script picked weights and prompt whose top two logits are
// at least 1e-3·max|logit| apart at every step, a thousand times fp32's error); and bad input — a
// missing checkpoint, a prompt longer than the context, a vocabulary the prompt does not fit, a
// negative --top-k, shape flags beside a checkpoint — is one line with its exit code.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GenerateCommandTest {

    @TempDir
    Path dir;

    @Test
    void aTrainedCheckpointGeneratesTheSameTextForTheSameSeed() {
        Path saves = dir.resolve("saves");
        CliRunner.Result t = CliRunner.run("train", "--steps", "4", "--batch-size", "2", "--seq-len", "32", "--device",
                "cpu", "--cpu-threads", "1", "--save-dir", saves.toString(), "--save-every", "4");
        assertEquals(0, t.exitCode(), t.err());
        String latest = saves.resolve("latest").toString();
        String[] greedy = {"generate", "--from", latest, "--prompt", "The ", "--temperature", "0", "--max-new-tokens",
                "24", "--device", "cpu"};
        CliRunner.Result a = CliRunner.run(greedy);
        CliRunner.Result b = CliRunner.run(greedy);
        assertEquals(0, a.exitCode(), a.err());
        assertEquals(0, b.exitCode(), b.err());
        List<String> lines = a.out().lines().toList();
        assertEquals(3, lines.size(), a.out());
        assertTrue(lines.get(0).startsWith("generate: gpt, 2 layers") && lines.get(0).contains("(step 4)")
                && lines.get(0).endsWith("on cpu | greedy"), lines.get(0));
        String text = lines.get(1);
        assertTrue(text.startsWith("The ") && text.length() > "The ".length(), "prompt, then generated text: " + text);
        assertEquals(text, b.out().lines().toList().get(1), "greedy: the same text twice");
        assertTrue(lines.get(2).matches("generated 24 tokens after a prompt of 4 in [0-9.]+ s \\([0-9.]+ tokens/s\\)"
                + " \\| stopped: --max-new-tokens 24 reached"), lines.get(2));

        String[] sampled = {"generate", "--from", saves.toString(), "--prompt", "The ", "--top-k", "8", "--seed", "42",
                "--max-new-tokens", "24", "--device", "cpu"};
        String first = CliRunner.run(sampled).out().lines().toList().get(1);
        assertEquals(first, CliRunner.run(sampled).out().lines().toList().get(1), "seed 42: the same text twice");

        // context 128: a prompt of 120 leaves room for 8 tokens
        CliRunner.Result full = CliRunner.run("generate", "--from", latest, "--prompt", "x".repeat(120), "--device", "cpu");
        assertEquals(0, full.exitCode(), full.err());
        assertTrue(full.out().contains("generated 8 tokens after a prompt of 120")
                && full.out().contains("stopped: the context of 128 tokens is full"), full.out());

        assertOneLine(CliRunner.run("generate", "--from", latest, "--prompt", "x".repeat(129), "--device", "cpu"), 1,
                "error: --prompt is 129 tokens, longer than the model's context of 128: shorten it");
        assertOneLine(CliRunner.run("generate", "--from", latest, "--prompt", "x", "--top-k", "-1", "--device", "cpu"), 1,
                "error: --top-k must be 0 (every token) or a positive number of tokens, got -1");
        assertOneLine(CliRunner.run("generate", "--from", latest, "--prompt", "x", "--layers", "3", "--device", "cpu"), 1,
                "error: --from " + latest + " is a checkpoint, which gives the model's family and shape: drop --model,"
                        + " --preset and the shape flags");
        assertOneLine(CliRunner.run("generate", "--from", dir.resolve("none").toString(), "--prompt", "x", "--device",
                "cpu"), 9, "error: " + dir.resolve("none") + ": no such checkpoint directory");
    }

    @Test
    void gpt2LayoutWeightsGivePyTorchsGreedyTokens() throws IOException, URISyntaxException {
        Path weights = Path.of(GenerateCommandTest.class.getResource("/generate/gpt2_generate_tiny.safetensors").toURI());
        JsonNode ref = new ObjectMapper().readTree(GenerateCommandTest.class.getResource("/generate/gpt2_generate_tiny.json"));
        JsonNode c = ref.get("config");
        int[] prompt = ints(ref.get("prompt"));
        int[] want = ints(ref.get("greedy"));
        String[] shape = {"--model", "gpt", "--layers", c.get("numLayers").asText(), "--hidden", c.get("embedDim").asText(),
                "--heads", c.get("numHeads").asText(), "--vocab", c.get("vocabSize").asText(), "--context",
                c.get("maxSeqLen").asText()};
        List<String> args = new ArrayList<>(List.of("generate", "--from", weights.toString(), "--token-ids", "--prompt",
                Arrays.toString(prompt).replaceAll("[\\[\\]]", ""), "--temperature", "0", "--max-new-tokens",
                String.valueOf(want.length), "--device", "cpu"));
        args.addAll(List.of(shape));
        CliRunner.Result r = CliRunner.run(args.toArray(String[]::new));
        assertEquals(0, r.exitCode(), r.err());
        int[] printed = Arrays.stream(r.out().lines().toList().get(1).trim().split(" ")).mapToInt(Integer::parseInt).toArray();
        assertEquals(Arrays.toString(prompt), Arrays.toString(Arrays.copyOf(printed, prompt.length)), "the prompt first");
        assertEquals(Arrays.toString(want), Arrays.toString(Arrays.copyOfRange(printed, prompt.length, printed.length)),
                "greedy tokens of PyTorch's float64 reference");

        List<String> text = new ArrayList<>(List.of("generate", "--from", weights.toString(), "--prompt", "hi", "--device",
                "cpu"));
        text.addAll(List.of(shape));
        assertOneLine(CliRunner.run(text.toArray(String[]::new)), 1, "error: the model's vocabulary has 50 tokens, fewer"
                + " than the prompt's tokenizer, bytes (256 tokens): give --token-ids and the prompt as token ids,"
                + " or a model trained on that vocabulary");
    }

    private static int[] ints(JsonNode array) {
        int[] a = new int[array.size()];
        for (int i = 0; i < a.length; i++) {
            a[i] = array.get(i).asInt();
        }
        return a;
    }

    /** The command exited with {@code code}, printing exactly {@code line} on stderr (besides JVM warnings). */
    private static void assertOneLine(CliRunner.Result r, int code, String line) {
        assertEquals(code, r.exitCode(), r.err());
        List<String> err = r.err().lines().filter(l -> !l.startsWith("WARNING")).toList();
        assertEquals(List.of(line), err);
        assertFalse(r.err().contains("\tat "), "no stack trace: " + r.err());
    }

    @Test
    void aModelTrainedThroughATokenizerGeneratesThroughIt() throws IOException {
        Path tokenizer = org.fsdp4j.data.TestTokenizers.copy("llama-style-tokenizer.json", dir);    // 278 tokens
        Path text = dir.resolve("text.txt");
        java.nio.file.Files.writeString(text, org.fsdp4j.data.TestTokenizers.text("multilingual.txt").repeat(4));
        Path saves = dir.resolve("saves");
        CliRunner.Result t = CliRunner.run("train", "--steps", "3", "--batch-size", "2", "--seq-len", "32", "--device",
                "cpu", "--cpu-threads", "1", "--data", text.toString(), "--tokenizer", tokenizer.toString(), "--vocab",
                "278", "--save-dir", saves.toString(), "--save-every", "3");
        assertEquals(0, t.exitCode(), t.err());
        String[] greedy = {"generate", "--from", saves.resolve("latest").toString(), "--tokenizer", tokenizer.toString(),
                "--prompt", "hello", "--temperature", "0", "--max-new-tokens", "6", "--device", "cpu"};
        CliRunner.Result a = CliRunner.run(greedy);
        assertEquals(0, a.exitCode(), a.err());
        List<String> lines = a.out().lines().toList();
        assertTrue(lines.get(1).startsWith("hello") && lines.get(1).length() > "hello".length(), a.out());
        assertEquals(a.out().lines().toList().get(1), CliRunner.run(greedy).out().lines().toList().get(1));
        assertTrue(lines.get(2).startsWith("generated 6 tokens after a prompt of "), lines.get(2));

        CliRunner.Result both = CliRunner.run("generate", "--from", saves.toString(), "--tokenizer", tokenizer.toString(),
                "--token-ids", "--prompt", "1 2", "--device", "cpu");
        assertEquals(1, both.exitCode(), both.err());
        assertEquals("error: --token-ids and --tokenizer both say how the prompt is read: give one\n", both.err());
    }
}
