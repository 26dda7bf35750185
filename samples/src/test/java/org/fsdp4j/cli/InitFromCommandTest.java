// `train --init-from`: a Llama (and a GPT) trained ten steps, saved and exported to safetensors
// (so the weights are not the seed's), then trained from that file at one rank and at two. The
// first step's loss of each run equals the loss the loaded weights give in this process, computed
// without the engine (a ParameterStore filled by LlamaWeights or Gpt2Weights, the model's forward
// on the run's first batch). The GPT's export is Hugging Face's GPT-2 layout (Conv1D weights
// transposed), so its round trip also runs Gpt2Weights' mapping. A path that does not exist,
// weights of another shape, another family's weights and weights holding NaN or Inf are each one
// line and exit 1 before any step.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.api.Batch;
import org.fsdp4j.data.BatchSampler;
import org.fsdp4j.data.TokenCorpus;
import org.fsdp4j.model.DecoderModel;
import org.fsdp4j.model.Gpt2Weights;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.GptModel;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.model.LlamaModel;
import org.fsdp4j.model.LlamaWeights;
import org.fsdp4j.model.ParameterStore;
import org.fsdp4j.weights.PretrainedWeights;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class InitFromCommandTest {

    private static final int BATCH = 4;
    private static final int SEQ = 32;
    private static final long SEED = 5;
    /** fp32 sums over the batch in another order (threads, ranks) move the mean loss by a few ulps. */
    private static final double LOSS_RTOL = 1e-5;

    @TempDir
    Path dir;
    Path weights;

    /** Trains the tiny Llama ten steps at a high lr, saves, and exports the checkpoint as Hugging Face safetensors. */
    @BeforeEach
    void exportTrainedWeights() {
        Path saves = dir.resolve("saves");
        CliRunner.Result r = CliRunner.run("train", "--model", "llama", "--steps", "10", "--lr", "0.01", "--batch-size",
                "2", "--seq-len", "16", "--device", "cpu", "--cpu-threads", "1", "--save-dir", saves.toString(),
                "--save-every", "10");
        assertEquals(0, r.exitCode(), r.err());
        weights = dir.resolve("llama-tiny.safetensors");
        CliRunner.Result e = CliRunner.run("checkpoint", "export", saves.toString(), "--to", weights.toString());
        assertEquals(0, e.exitCode(), e.err());
    }

    @Test
    void theFirstLossIsTheLoadedWeightsLossAtOneRankAndAtTwo() throws IOException {
        double expected = lossOfLoadedWeights();
        for (int worldSize : new int[] {1, 2}) {
            Path out = dir.resolve("run-" + worldSize);
            CliRunner.Result r = CliRunner.run("train", "--model", "llama", "--init-from", weights.toString(),
                    "--world-size", String.valueOf(worldSize), "--steps", "3", "--batch-size", String.valueOf(BATCH),
                    "--seq-len", String.valueOf(SEQ), "--seed", String.valueOf(SEED), "--device", "cpu",
                    "--cpu-threads", "2", "--out", out.toString());
            assertEquals(0, r.exitCode(), r.err());
            assertTrue(r.out().contains("initial parameters from " + weights), r.out());
            JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
            double first = s.get("losses").get(0).asDouble();
            System.out.printf("--init-from at N = %d: first loss %.7f, in-process %.7f (rel. diff %.2g)%n", worldSize,
                    first, expected, Math.abs(first - expected) / expected);
            assertEquals(expected, first, LOSS_RTOL * expected, "first loss at N = " + worldSize);
        }
        CliRunner.Result seeded = CliRunner.run("train", "--model", "llama", "--steps", "1", "--batch-size",
                String.valueOf(BATCH), "--seq-len", String.valueOf(SEQ), "--seed", String.valueOf(SEED), "--device", "cpu",
                "--cpu-threads", "2", "--out", dir.resolve("seeded").toString());
        assertEquals(0, seeded.exitCode(), seeded.err());
        double seededFirst = new ObjectMapper().readTree(dir.resolve("seeded").resolve("summary.json").toFile())
                .get("losses").get(0).asDouble();
        assertNotEquals(expected, seededFirst, 0.05, "the weights are not the seed's (the export trained ten steps)");
    }

    @Test
    void weightsThatCannotBeLoadedAreOneLineAndExitOne() {
        assertRefused("the weights " + dir.resolve("missing.safetensors") + " do not exist",
                "--model", "llama", "--init-from", dir.resolve("missing.safetensors").toString());
        assertRefused("tensor model.embed_tokens.weight has shape [256, 128], the model's model.embed_tokens.weight"
                + " needs [256, 384]", "--model", "llama", "--preset", "small", "--init-from", weights.toString());
        assertRefused("holds neither model.safetensors nor model.safetensors.index.json", "--model", "llama",
                "--init-from", dir.toString());
        assertRefused("has no tensor wte.weight (for parameter wte)", "--init-from", weights.toString());
    }

    /** Weights with a NaN (a diverged run's export) are refused on loading, naming the tensor, not as a divergence at step 1. */
    @Test
    void weightsHoldingNanOrInfAreRefusedNamingTheTensor() throws IOException {
        String tensor = "model.layers.1.mlp.up_proj.weight";
        for (float bad : new float[] {Float.NaN, Float.NEGATIVE_INFINITY}) {
            Path broken = dir.resolve("broken.safetensors");
            java.nio.file.Files.copy(weights, broken, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            long at;
            try (org.fsdp4j.weights.SafetensorsFile f = org.fsdp4j.weights.SafetensorsFile.open(broken)) {
                assertEquals(org.fsdp4j.weights.SafetensorsFile.Dtype.F32, f.entry(tensor).dtype());
                long headerBytes = java.nio.ByteBuffer.wrap(java.nio.file.Files.readAllBytes(broken), 0, 8)
                        .order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
                at = 8 + headerBytes + f.entry(tensor).begin() + 5L * Float.BYTES;      // element 5
            }
            try (java.nio.channels.FileChannel c = java.nio.channels.FileChannel.open(broken,
                    java.nio.file.StandardOpenOption.WRITE)) {
                c.write(java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putFloat(0, bad), at);
            }
            assertRefused(broken + ": tensor " + tensor + " holds " + bad + " (element 5 of ", "--model", "llama",
                    "--init-from", broken.toString());
        }
    }

    @Test
    void aGptStartsFromItsOwnExportAtOneRankAndAtTwo() throws IOException {
        Path saves = dir.resolve("gpt-saves");
        CliRunner.Result r = CliRunner.run("train", "--steps", "10", "--lr", "0.01", "--batch-size", "2", "--seq-len",
                "16", "--device", "cpu", "--cpu-threads", "1", "--save-dir", saves.toString(), "--save-every", "10");
        assertEquals(0, r.exitCode(), r.err());
        Path gpt = dir.resolve("gpt-tiny.safetensors");
        CliRunner.Result e = CliRunner.run("checkpoint", "export", saves.toString(), "--to", gpt.toString());
        assertEquals(0, e.exitCode(), e.err());
        double expected = lossOfLoadedGpt(gpt);
        for (int worldSize : new int[] {1, 2}) {
            Path out = dir.resolve("gpt-run-" + worldSize);
            CliRunner.Result run = CliRunner.run("train", "--init-from", gpt.toString(), "--world-size",
                    String.valueOf(worldSize), "--steps", "2", "--batch-size", String.valueOf(BATCH), "--seq-len",
                    String.valueOf(SEQ), "--seed", String.valueOf(SEED), "--device", "cpu", "--cpu-threads", "2",
                    "--out", out.toString());
            assertEquals(0, run.exitCode(), run.err());
            double first = new ObjectMapper().readTree(out.resolve("summary.json").toFile()).get("losses").get(0).asDouble();
            System.out.printf("GPT --init-from at N = %d: first loss %.7f, in-process %.7f (rel. diff %.2g)%n",
                    worldSize, first, expected, Math.abs(first - expected) / expected);
            assertEquals(expected, first, LOSS_RTOL * expected, "GPT first loss at N = " + worldSize);
        }
        assertTrue(expected < 5.0, "ten steps at lr 0.01 move the loss well below the seed's ln(256) = 5.55: " + expected);
    }

    private static void assertRefused(String expected, String... flags) {
        List<String> args = new java.util.ArrayList<>(List.of("train", "--steps", "1", "--batch-size", "2", "--seq-len",
                "16", "--device", "cpu", "--cpu-threads", "1"));
        args.addAll(List.of(flags));
        CliRunner.Result r = CliRunner.run(args.toArray(String[]::new));
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode(), r.err());
        List<String> lines = r.err().lines().toList();
        assertEquals(1, lines.size(), r.err());
        assertTrue(lines.get(0).startsWith("error: ") && lines.get(0).contains(expected),
                "'" + lines.get(0) + "' does not contain '" + expected + "'");
        assertFalse(r.out().contains("step 1/"), "training started: " + r.out());
    }

    /** The mean loss of a GPT export on the runs' first batch: Gpt2Weights into a ParameterStore, no engine. */
    private static double lossOfLoadedGpt(Path file) {
        GptConfig config = GptConfig.preset("tiny");
        return firstBatchLoss(() -> Gpt2Weights.open(file, config), backend -> new GptModel(config, backend, false));
    }

    /** The mean loss of the exported weights on the runs' first batch: LlamaWeights into a ParameterStore, no engine. */
    private double lossOfLoadedWeights() {
        LlamaConfig config = LlamaConfig.preset("tiny");
        return firstBatchLoss(() -> LlamaWeights.open(weights, config), backend -> new LlamaModel(config, backend, false));
    }

    /** The model's forward on the runs' first batch, its parameters filled from the opened weights. */
    private static double firstBatchLoss(Supplier<PretrainedWeights> open, Function<Backend, DecoderModel<?>> build) {
        Batch batch = new BatchSampler(TokenCorpus.embeddedDefault(), BATCH, SEQ, SEED).sample(1);
        try (Backend backend = Backends.create(Device.CPU, new MemoryTracker("in-process"), 1);
             PretrainedWeights loaded = open.get();
             DecoderModel<?> model = build.apply(backend);
             ParameterStore store = new ParameterStore(backend, model.units());
             Tensor tokens = backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, BATCH, SEQ);
             Tensor targets = backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, BATCH, SEQ)) {
            store.initialize(loaded);
            backend.copyFromHost(batch.field(DecoderModel.TOKENS).ints(), 0, tokens);
            backend.copyFromHost(batch.field(DecoderModel.TARGETS).ints(), 0, targets);
            return model.forward(tokens, targets, UnitHooks.NONE);
        }
    }
}
