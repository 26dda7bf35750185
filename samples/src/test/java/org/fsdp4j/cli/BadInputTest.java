// Bad input to `fsdp4j train` ends with one clear line on stderr and a non-zero exit, before
// any training, and never with a stack trace.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BadInputTest {

    @TempDir
    Path dir;

    private static void assertOneLineError(String expected, String... args) {
        CliRunner.Result r = CliRunner.run(args);
        String cmd = String.join(" ", args);
        assertNotEquals(0, r.exitCode(), cmd);
        List<String> lines = r.err().lines().toList();
        assertEquals(1, lines.size(), cmd + " printed:\n" + r.err());
        String line = lines.get(0);
        assertTrue(line.startsWith("error: "), line);
        assertTrue(line.contains(expected), "'" + line + "' does not contain '" + expected + "'");
        assertFalse(line.contains("Exception"), line);
        assertFalse(r.out().contains("step 1/"), cmd + " started training");
    }

    @Test
    void unknownPreset() {
        assertOneLineError("unknown preset 'huge': use one of", "train", "--preset", "huge");
        assertOneLineError("unknown Llama preset 'gpt2-124m': use one of [tiny, small, bench-4x256, tinyllama-1.1b]",
                "train", "--model", "llama", "--preset", "gpt2-124m");
        assertOneLineError("unknown model 'bert': use --model gpt or --model llama", "train", "--model", "bert");
    }

    @Test
    void presetBesideModelConfigIsRefusedNotIgnored() throws IOException {
        Path config = Files.writeString(dir.resolve("config.json"),
                "{\"n_layer\": 2, \"n_embd\": 64, \"n_head\": 2, \"vocab_size\": 256, \"n_positions\": 64}");
        String both = "--preset small and --model-config " + config + " both give the model's shape: keep one";
        assertOneLineError(both, "train", "--preset", "small", "--model-config", config.toString());
        assertOneLineError(both, "plan", "--preset", "small", "--model-config", config.toString());
    }

    /** A file where a checkpoint directory belongs is named as a file (exit 9), not "no such directory". */
    @Test
    void aFileGivenAsACheckpointIsSaidToBeAFile() throws IOException {
        Path file = Files.writeString(dir.resolve("model.safetensors"), "not a checkpoint");
        String expected = "error: " + file + ": is a file, not a checkpoint directory: give the checkpoint's directory"
                + " (step-NNNNNNNN) or the --save-dir that holds it";
        for (String[] args : new String[][] {{"train", "--steps", "2", "--device", "cpu", "--resume", file.toString()},
            {"checkpoint", "inspect", file.toString()},
            {"checkpoint", "export", file.toString(), "--to", dir.resolve("out.safetensors").toString()}}) {
            CliRunner.Result r = CliRunner.run(args);
            assertEquals(ExitCode.BAD_CHECKPOINT.code(), r.exitCode(), String.join(" ", args) + ": " + r.err());
            assertEquals(expected, r.err().strip(), String.join(" ", args));
        }
    }

    /** --model-config's sizes are named as config.json names them, not as GptConfig's fields (embedDim, numHeads). */
    @Test
    void aConfigJsonsBadShapeIsNamedInItsOwnKeys() throws IOException {
        Path gpt = Files.writeString(dir.resolve("gpt.json"), "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 100,"
                + " \"n_head\": 3, \"vocab_size\": 256, \"n_positions\": 64}");
        assertOneLineError("--model-config " + gpt + ": n_embd 100 is not divisible by n_head 3: pick an n_head that"
                + " divides n_embd", "train", "--model-config", gpt.toString());
        Files.writeString(gpt, Files.readString(gpt).replace("\"n_layer\": 2", "\"n_layer\": 0"));
        assertOneLineError("--model-config " + gpt + ": n_layer must be at least 1, got 0", "plan", "--model-config",
                gpt.toString());
        Path llama = Files.writeString(dir.resolve("llama.json"), "{\"model_type\": \"llama\", \"vocab_size\": 256,"
                + " \"max_position_embeddings\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                + " \"num_key_value_heads\": 3, \"hidden_size\": 64, \"intermediate_size\": 96}");
        assertOneLineError("--model-config " + llama + ": num_key_value_heads 3 does not divide num_attention_heads 4",
                "train", "--model", "llama", "--model-config", llama.toString());
        for (String[] args : new String[][] {{"train", "--model-config", gpt.toString()},
            {"train", "--model", "llama", "--model-config", llama.toString()}}) {
            String err = CliRunner.run(args).err();
            for (String field : new String[] {"embedDim", "numHeads", "numLayers", "numKvHeads", "Config"}) {
                assertFalse(err.contains(field), err);
            }
        }
    }

    /** Flag values are shown as typed and sizes by their flags: not 1.0E-5, not LlamaConfig's embedDim. */
    @Test
    void valuesAndSizesAreShownAsTheUserGaveThem() {
        assertOneLineError("--min-lr must be between 0 and --lr (1e-5), got 3e-4", "train", "--lr", "1e-5", "--min-lr",
                "3e-4");
        assertOneLineError("the head size 5 (width 30 (--hidden) / 6 heads (--heads)) is odd", "train", "--model", "llama",
                "--hidden", "30", "--heads", "6");
    }

    /** A config.json key that would change the model fsdp4j builds is refused naming it; keys that do not are taken. */
    @Test
    void configJsonKeysThatChangeTheModelAreRefusedNotIgnored() throws IOException {
        // GPT-2's own config.json (huggingface.co/gpt2), shrunk: its dropout, summary_* and bookkeeping keys are harmless
        String gpt2 = "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1,"
                + " \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256, \"initializer_range\": 0.02,"
                + " \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 64, \"n_embd\": 32, \"n_head\": 2,"
                + " \"n_inner\": null, \"n_layer\": 1, \"n_positions\": 64, \"resid_pdrop\": 0.1, \"scale_attn_weights\": true,"
                + " \"summary_activation\": null, \"summary_first_dropout\": 0.1, \"summary_proj_to_labels\": true,"
                + " \"summary_type\": \"cls_index\", \"summary_use_proj\": true, \"task_specific_params\": {\"text-generation\":"
                + " {\"do_sample\": true, \"max_length\": 50}}, \"torch_dtype\": \"float32\", \"transformers_version\":"
                + " \"4.40.0\", \"use_cache\": true, \"reorder_and_upcast_attn\": false,"
                + " \"scale_attn_by_inverse_layer_idx\": false, \"vocab_size\": 256}";
        Path config = Files.writeString(dir.resolve("config.json"), gpt2);
        CliRunner.Result ok = CliRunner.run("plan", "--model-config", config.toString());
        assertEquals(0, ok.exitCode(), ok.err());
        String[][] refused = {{"\"activation_function\": \"gelu_new\"", "\"activation_function\": \"relu\"",
            "activation_function is \"relu\""},
            {"\"scale_attn_by_inverse_layer_idx\": false", "\"scale_attn_by_inverse_layer_idx\": true",
                "scale_attn_by_inverse_layer_idx is true"},
            {"\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": 1e-06", "layer_norm_epsilon is 1e-6"},
            {"\"n_inner\": null", "\"n_inner\": 64", "n_inner is 64"},
            {"\"use_cache\": true", "\"use_cache\": true, \"tie_word_embeddings\": false", "tie_word_embeddings is false"},
            {"\"use_cache\": true", "\"use_cache\": true, \"add_cross_attention\": true", "add_cross_attention is true"}};
        for (String[] r : refused) {
            Files.writeString(config, gpt2.replace(r[0], r[1]));
            assertOneLineError("--model-config " + config + ": " + r[2] + ", which fsdp4j's GPT does not support", "train",
                    "--model-config", config.toString());
        }
        Files.writeString(config, gpt2.replace("\"model_type\": \"gpt2\"", "\"model_type\": \"llama\""));
        assertOneLineError("model_type is \"llama\", not gpt2: add --model llama", "train", "--model-config",
                config.toString());

        // TinyLlama-1.1B's config.json, shrunk
        String tiny = "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
                + " \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 32,"
                + " \"initializer_range\": 0.02, \"intermediate_size\": 48, \"max_position_embeddings\": 64,"
                + " \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_hidden_layers\": 1,"
                + " \"num_key_value_heads\": 2, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null,"
                + " \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\","
                + " \"transformers_version\": \"4.35.0\", \"use_cache\": true, \"vocab_size\": 256, \"head_dim\": 8}";
        Files.writeString(config, tiny);
        CliRunner.Result llama = CliRunner.run("plan", "--model", "llama", "--model-config", config.toString());
        assertEquals(0, llama.exitCode(), llama.err());
        String[][] llamaRefused = {{"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act is \"gelu\""},
            {"\"attention_bias\": false", "\"attention_bias\": true", "attention_bias is true"},
            {"\"mlp_bias\": false", "\"mlp_bias\": true", "mlp_bias is true"},
            {"\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true", "tie_word_embeddings is true"},
            {"\"use_cache\": true", "\"use_cache\": true, \"sliding_window\": 4096", "sliding_window is 4096"},
            {"\"head_dim\": 8", "\"head_dim\": 16", "head_dim is 16"}};
        for (String[] r : llamaRefused) {
            Files.writeString(config, tiny.replace(r[0], r[1]));
            assertOneLineError("--model-config " + config + ": " + r[2] + ", which fsdp4j's Llama does not support",
                    "train", "--model", "llama", "--model-config", config.toString());
        }
    }

    @Test
    void dataFileMissingEmptyOrTooShort() throws IOException {
        assertOneLineError("does not exist", "train", "--data", dir.resolve("missing.txt").toString());
        Path empty = Files.createFile(dir.resolve("empty.txt"));
        assertOneLineError("is empty", "train", "--data", empty.toString());
        Path shortFile = Files.writeString(dir.resolve("short.txt"), "hello world");
        assertOneLineError("use --seq-len 10 or less", "train", "--data", shortFile.toString(), "--seq-len", "64");
    }

    @Test
    void sequenceLongerThanThePresetsContext() {
        assertOneLineError("--seq-len 129 is longer than the tiny model's context of 128", "train", "--seq-len", "129");
    }

    @Test
    void nonPositiveCounts() {
        assertOneLineError("--steps must be at least 1, got 0", "train", "--steps", "0");
        assertOneLineError("--steps must be at least 1, got -3", "train", "--steps", "-3");
        assertOneLineError("--batch-size must be at least 1, got 0", "train", "--batch-size", "0");
        assertOneLineError("--seq-len must be at least 1", "train", "--seq-len", "0");
    }

    @Test
    void unknownDevice() {
        assertOneLineError("unknown device 'tpu': use --device auto, cpu, cuda", "train", "--device", "tpu");
    }

    @Test
    void gpuRanksWithoutAGpuSayWhy() {
        org.fsdp4j.cuda.CudaProbe.Result probe = org.fsdp4j.cuda.CudaProbe.probe();
        org.junit.jupiter.api.Assumptions.assumeFalse(probe.usable(), "a GPU is usable here");
        assertOneLineError("device cuda is not usable: " + probe.unavailableReason().orElseThrow(), "train", "--device",
                "cuda", "--world-size", "2");
    }

    @Test
    void unparsableFlags() {
        assertOneLineError("'abc' is not an int", "train", "--steps", "abc");
        assertOneLineError("Unknown option: '--bogus'", "train", "--bogus");
        assertOneLineError("missing command", new String[0]);
    }

    @Test
    void outputPathThatIsAFile() throws IOException {
        Path file = Files.writeString(dir.resolve("taken"), "x");
        assertOneLineError("is not a directory", "train", "--steps", "1", "--out", file.toString());
    }

    /**
     * An --out that cannot be written fails before the first step: a million steps would take
     * hours, so a generous bound on the time proves nothing ran (nor did "step 1/" print).
     */
    @Test
    void unwritableOutputFailsBeforeTheFirstStep() throws IOException {
        Path file = Files.writeString(dir.resolve("a-file"), "x");
        List<String[]> cases = new java.util.ArrayList<>(List.of(
                new String[] {"cannot create output directory", file.resolve("sub").toString()},
                new String[] {"--out is empty", ""}));
        if (Files.isDirectory(Path.of("/proc/self"))) {
            cases.add(new String[] {"cannot create output directory /proc/fsdp4j", "/proc/fsdp4j"});
        }
        Path readOnly = Files.createDirectory(dir.resolve("read-only"));
        if (readOnly.toFile().setWritable(false, false) && !Files.isWritable(readOnly)) {   // root writes anyway
            cases.add(new String[] {"pass --out a directory you can write", readOnly.resolve("run").toString()});
        }
        for (String[] c : cases) {
            long start = System.nanoTime();
            assertOneLineError(c[0], "train", "--steps", "1000000", "--device", "cpu", "--out", c[1]);
            double seconds = (System.nanoTime() - start) / 1e9;
            assertTrue(seconds < 10, "--out '" + c[1] + "' took " + seconds + " s to fail");
            assertOneLineError(c[0], "bench", "gemm", "--device", "cpu", "--sizes", "64", "--out", c[1]);
        }
        assertEquals(ExitCode.BAD_INPUT.code(), CliRunner.run("train", "--out", file.toString()).exitCode());
    }

    @Test
    void sizesThatOverflowAreRejectedWithTheirLimits() {
        assertOneLineError("--sizes must be between 1 and 23170, got 100000", "bench", "gemm", "--sizes", "100000");
        assertOneLineError("--warmup must be >= 0, got -1", "bench", "gemm", "--warmup", "-1", "--sizes", "64");
        assertOneLineError("--iters must be at least 1, got 0", "bench", "gemm", "--iters", "0", "--sizes", "64");
        assertOneLineError("tokens per step; at most 2147483647 are supported", "train", "--batch-size", "2000000000");
        assertOneLineError("one buffer of the step needs", "train", "--batch-size", "2000000", "--device", "cpu");
        assertOneLineError("--cpu-threads must be between 0 (all cores) and 32767, got 100000", "train",
                "--cpu-threads", "100000");
        assertOneLineError("--cpu-threads must be between 0 (all cores) and 32767", "bench", "gemm", "--cpu-threads",
                "40000");
    }

    @Test
    void divergenceAndOtherNewFlagsAreChecked() {
        assertOneLineError("unknown --on-nonfinite 'maybe': use stop or skip", "train", "--on-nonfinite", "maybe");
        assertOneLineError("--max-skipped-steps applies to --on-nonfinite skip only", "train", "--max-skipped-steps", "3");
        assertOneLineError("--max-skipped-steps must be at least 1", "train", "--on-nonfinite", "skip",
                "--max-skipped-steps", "0");
        assertOneLineError("'lots' is not a size", "train", "--memory-limit", "lots");
        assertOneLineError("--world-size does not apply: use --world-sizes 2", "bench", "sharding", "--world-size", "2");
    }
}
