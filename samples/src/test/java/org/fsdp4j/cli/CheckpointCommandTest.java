// The checkpoint tools and the model-shape flags from the command line: a run saves; `checkpoint
// inspect` verifies it; `checkpoint export` writes safetensors that a hand parser here (the header
// JSON and the bytes, none of the exporter's code) reads back as the model's own parameters, in fp32
// exactly and in bf16 and fp16 rounded once; a flipped byte is exit 9 with one line naming the file; a
// config.json and the override flags shape the model, an impossible shape is one line; `plan` prints
// the textbook case.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.fsdp4j.api.DType;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.train.CheckpointOptions;
import org.fsdp4j.train.EngineStepExecutor;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.Trainer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointCommandTest {

    @TempDir
    Path dir;

    /** Trains 3 steps at 2 ranks saving at step 3; returns the model's parameters by name, gathered from the shards (stateDict). */
    private Map<String, float[]> trainAndSave(Path saves) {
        TrainConfig c = TrainConfig.builder().preset("test").model(new GptConfig(256, 16, 2, 2, 30)).steps(3).batchSize(2)
                .seqLen(16).fsdp(f -> f.worldSize(2).device("cpu").cpuThreads(1)).build();
        Map<String, float[]> params = new HashMap<>();
        try (Trainer t = new Trainer(c, new CheckpointOptions(3, Optional.of(saves), 1, Optional.empty()), l -> { })) {
            t.run(r -> { });
            params.putAll(((EngineStepExecutor) t.executor()).model().stateDict());   // the API's gathered masters
        }
        return params;
    }

    /** A safetensors file read by hand: name → (shape, values widened to fp32). */
    private record Tensor(long[] shape, float[] values, String dtype) {
    }

    private static Map<String, Tensor> readSafetensors(Path file) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        long headerLength = b.getLong(0);
        JsonNode header = new ObjectMapper().readTree(new String(bytes, 8, (int) headerLength, StandardCharsets.UTF_8));
        int data = 8 + (int) headerLength;
        Map<String, Tensor> out = new HashMap<>();
        for (var it = header.fields(); it.hasNext(); ) {
            var e = it.next();
            if (e.getKey().equals("__metadata__")) {
                continue;
            }
            JsonNode t = e.getValue();
            long[] shape = new long[t.get("shape").size()];
            long numel = 1;
            for (int i = 0; i < shape.length; i++) {
                shape[i] = t.get("shape").get(i).asLong();
                numel *= shape[i];
            }
            long begin = t.get("data_offsets").get(0).asLong();
            long end = t.get("data_offsets").get(1).asLong();
            String dtype = t.get("dtype").asText();
            boolean bf16 = dtype.equals("BF16");
            boolean f16 = dtype.equals("F16");
            assertEquals(numel * (bf16 || f16 ? 2 : 4), end - begin, e.getKey());
            float[] v = new float[(int) numel];
            for (int i = 0; i < v.length; i++) {
                v[i] = bf16 ? Float.intBitsToFloat((b.getShort(data + (int) begin + 2 * i) & 0xffff) << 16)
                        : f16 ? half(b.getShort(data + (int) begin + 2 * i))
                        : b.getFloat(data + (int) begin + 4 * i);
            }
            out.put(e.getKey(), new Tensor(shape, v, dtype));
        }
        return out;
    }

    /** IEEE binary16 bits → value, by the definition (not DType's conversion): finite values only. */
    private static float half(short bits) {
        int sign = (bits & 0x8000) != 0 ? -1 : 1;
        int exp = (bits >>> 10) & 0x1f;
        int mant = bits & 0x3ff;
        assertTrue(exp != 0x1f, "an fp16 infinity or NaN in the export");
        return sign * (exp == 0 ? Math.scalb((float) mant, -24) : Math.scalb((float) (1024 + mant), exp - 25));
    }

    /** (rows, cols) → (cols, rows): Hugging Face GPT-2 keeps Linear weights as Conv1D, (in, out). */
    private static float[] transpose(float[] a, int rows, int cols) {
        float[] t = new float[a.length];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                t[c * rows + r] = a[r * cols + c];
            }
        }
        return t;
    }

    @Test
    void exportIsReadBackByAnIndependentParserAsTheModelsParameters() throws IOException {
        Path saves = dir.resolve("saves");
        Map<String, float[]> model = trainAndSave(saves);
        CliRunner.Result inspect = CliRunner.run("checkpoint", "inspect", saves.toString());
        assertEquals(0, inspect.exitCode(), inspect.err());
        assertTrue(inspect.out().contains("step 3 of 3"), inspect.out());
        assertTrue(inspect.out().contains("verified: 2 files"), inspect.out());

        for (String dtype : new String[] {"fp32", "bf16", "fp16"}) {
            Path file = dir.resolve("model-" + dtype + ".safetensors");
            CliRunner.Result r = CliRunner.run("checkpoint", "export", saves.toString(), "--to", file.toString(), "--dtype", dtype);
            assertEquals(0, r.exitCode(), r.err());
            Map<String, Tensor> read = readSafetensors(file);
            assertEquals(model.size(), read.size(), "every parameter, the tied head not twice");
            Tensor qkv = read.get("transformer.h.1.attn.c_attn.weight");
            assertEquals(Map.of("fp32", "F32", "bf16", "BF16", "fp16", "F16").get(dtype), qkv.dtype(), "header dtype");
            assertEquals(List.of(30L, 90L), List.of(qkv.shape()[0], qkv.shape()[1]), "Conv1D layout (in, out)");
            assertTrue(read.containsKey("transformer.wte.weight") && read.containsKey("transformer.ln_f.bias"), read.keySet().toString());
            compare(model.get("h.1.attn.qkv.weight"), transpose(qkv.values(), 30, 90), dtype);
            compare(model.get("wte"), read.get("transformer.wte.weight").values(), dtype);
            compare(model.get("h.0.mlp.proj.weight"), transpose(read.get("transformer.h.0.mlp.c_proj.weight").values(), 120, 30), dtype);
            compare(model.get("h.0.ln2.bias"), read.get("transformer.h.0.ln_2.bias").values(), dtype);
        }
    }

    private static void compare(float[] model, float[] exported, String dtype) {
        assertEquals(model.length, exported.length);
        for (int i = 0; i < model.length; i++) {
            if (dtype.equals("fp16")) {
                // within half an fp16 ulp (2^-11 relative; 2^-25 absolute among the subnormals), and rounded
                // to nearest even exactly as DType's conversion does
                assertEquals(model[i], exported[i], Math.max(Math.abs(model[i]) * 0x1p-11f, 0x1p-25f), "fp16 element " + i);
                assertEquals(DType.halfToFloat(DType.floatToHalf(model[i])), exported[i], 0f, "fp16 element " + i);
                continue;
            }
            float want = dtype.equals("fp32") ? model[i] : DType.bf16ToFloat(DType.floatToBf16(model[i]));
            assertEquals(want, exported[i], 0f, dtype + " element " + i);
        }
    }

    @Test
    void aCorruptedCheckpointIsExitNineWithOneLineNamingTheFile() throws IOException {
        Path saves = dir.resolve("saves");
        trainAndSave(saves);
        Path rank0 = saves.resolve("step-00000003").resolve("rank-00000.bin");
        byte[] bytes = Files.readAllBytes(rank0);
        bytes[100] ^= 1;
        Files.write(rank0, bytes);
        for (String[] args : new String[][] {{"checkpoint", "inspect", saves.toString()},
            {"checkpoint", "export", saves.toString(), "--to", dir.resolve("x.safetensors").toString()},
            {"train", "--steps", "4", "--device", "cpu", "--resume", saves.toString(), "--batch-size", "2", "--seq-len", "16",
                "--layers", "2", "--hidden", "30", "--heads", "2", "--context", "16"}}) {
            CliRunner.Result r = CliRunner.run(args);
            assertEquals(ExitCode.BAD_CHECKPOINT.code(), r.exitCode(), String.join(" ", args) + ": " + r.err());
            assertEquals("error: " + rank0 + ": checksum mismatch", r.err().strip().replaceAll(" \\(CRC-32C.*", ""));
            assertEquals(1, r.err().strip().lines().count(), r.err());
        }
        CliRunner.Result other = CliRunner.run("train", "--steps", "4", "--device", "cpu", "--resume",
                dir.resolve("nothing-here").toString());
        assertEquals(ExitCode.BAD_CHECKPOINT.code(), other.exitCode(), other.err());
        assertEquals("error: " + dir.resolve("nothing-here") + ": no such checkpoint directory", other.err().strip());
    }

    @Test
    void modelShapeFlagsAndConfigJson() throws IOException {
        Path config = dir.resolve("config.json");
        Files.writeString(config, "{\"model_type\": \"gpt2\", \"n_layer\": 1, \"n_embd\": 24, \"n_head\": 3, "
                + "\"vocab_size\": 256, \"n_positions\": 16, \"activation_function\": \"gelu_new\"}");
        CliRunner.Result r = CliRunner.run("train", "--steps", "2", "--device", "cpu", "--batch-size", "2",
                "--model-config", config.toString(), "--out", dir.resolve("out").toString());
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("preset custom: 1 layers, 3 heads, width 24, context 16, vocab 256"), r.out());
        assertTrue(r.out().contains("planner vs measured after the first step"), r.out());
        JsonNode summary = new ObjectMapper().readTree(dir.resolve("out/summary.json").toFile());
        assertEquals(summary.at("/memory_check/predicted_persistent_bytes").asLong(),
                summary.at("/memory_check/measured_persistent_bytes_per_rank/0").asLong());
        assertEquals(2, Files.readAllLines(dir.resolve("out/metrics.jsonl")).size());
        assertTrue(Files.size(dir.resolve("out/loss.png")) > 0 && Files.size(dir.resolve("out/memory.png")) > 0);
        assertTrue(r.out().strip().lines().reduce((a, b) -> b).orElse("").contains("charts: "), r.out());

        CliRunner.Result bad = CliRunner.run("train", "--steps", "2", "--device", "cpu", "--hidden", "100", "--heads", "3");
        assertEquals(ExitCode.BAD_INPUT.code(), bad.exitCode(), bad.err());
        assertEquals("error: the width 100 (--hidden) is not divisible by 3 heads (--heads): pick a head count that divides"
                + " the width, e.g. 2", bad.err().strip());
        Files.writeString(config, "{\"n_layer\": 1, \"n_embd\": 24}");
        CliRunner.Result missing = CliRunner.run("plan", "--model-config", config.toString());
        assertEquals(ExitCode.BAD_INPUT.code(), missing.exitCode(), missing.err());
        assertEquals("error: --model-config " + config + ": n_head, vocab_size, n_positions are missing or not an integer"
                + " (a GPT-2 config.json has n_layer, n_embd, n_head, vocab_size, n_positions)", missing.err().strip());
    }

    @Test
    void planPrintsTheTextbookCase() {
        CliRunner.Result r = CliRunner.run("plan", "--params", "175e9", "--layers", "96", "--hidden", "12288", "--seq-len",
                "2048", "--gpus", "8", "--nodes", "8", "--gpu", "A100-80GB", "--checkpoint-activations", "--explain");
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("64 x A100-80GB (8 nodes x 8)"), r.out());
        assertTrue(r.out().contains("fsdp4j: 18.0 B/param"), r.out());
        assertTrue(r.out().contains("T_comm/T_comp"), r.out());
        assertTrue(r.out().contains("how:"), r.out());
        CliRunner.Result json = CliRunner.run("plan", "--preset", "gpt2-124m", "--gpus", "8", "--json");
        assertEquals(0, json.exitCode(), json.err());
        assertTrue(json.out().contains("\"comm_compute_ratio\""), json.out());
    }

    @Test
    void aLlamaConfigJsonShapesALlama() throws IOException {
        Path config = dir.resolve("config.json");
        Files.writeString(config, "{\"model_type\": \"llama\", \"vocab_size\": 256, \"max_position_embeddings\": 16,"
                + " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"hidden_size\": 16,"
                + " \"intermediate_size\": 24, \"rope_theta\": 500000.0, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false}");
        CliRunner.Result r = CliRunner.run("train", "--model", "llama", "--model-config", config.toString(), "--steps", "1",
                "--batch-size", "2", "--device", "cpu", "--cpu-threads", "1");
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("llama preset custom: 1 layers, 2 heads (1 key/value), width 16, MLP 24, context 16,"
                + " vocab 256"), r.out());
        Files.writeString(config, Files.readString(config).replace("\"tie_word_embeddings\": false",
                "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}"));
        CliRunner.Result scaled = CliRunner.run("train", "--model", "llama", "--model-config", config.toString());
        assertEquals(ExitCode.BAD_INPUT.code(), scaled.exitCode(), scaled.err());
        assertTrue(scaled.err().strip().startsWith("error: --model-config " + config + ": rope_scaling is {")
                && scaled.err().strip().endsWith("which fsdp4j's Llama does not support"), scaled.err());
    }

    @Test
    void planTakesTheLlamaFamily() throws IOException {
        CliRunner.Result r = CliRunner.run("plan", "--model", "llama", "--gpus", "8", "--explain");
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("llama 22 layers, 32 heads (4 key/value), width 2048, MLP 5632"), r.out());
        assertTrue(r.out().contains("P = 2·V·C + C + L·(2C + 2C² + 2·Hkv·D·C + 3·F·C) = 1,100,048,384"), r.out());
        CliRunner.Result json = CliRunner.run("plan", "--model", "llama", "--preset", "small", "--gpus", "4", "--json");
        assertEquals(0, json.exitCode(), json.err());
        JsonNode plan = new ObjectMapper().readTree(json.out());
        assertEquals(LlamaConfig.preset("small").parameterCount(), plan.get("params").asLong(), json.out());
        CliRunner.Result params = CliRunner.run("plan", "--model", "llama", "--params", "1e9", "--layers", "4", "--hidden", "64");
        assertEquals(ExitCode.BAD_INPUT.code(), params.exitCode(), params.err());
        assertTrue(params.err().startsWith("error: --params derives a GPT's vocabulary"), params.err());
    }
}
