// Pretrained Llama weights in Hugging Face's layout: the reference script's safetensors loaded into
// the FSDP engine at N = 1 and N = 4 (each rank reads only its shards' elements) give PyTorch's
// logits and loss on the same weights (llama_tiny_large.bin, within LlamaParityChecks' fp32
// tolerances), every rank's master shard holds exactly the file's values (F32, and BF16 widened),
// and a checkpoint that does not fit the model — a tensor missing, of another shape, truncated, or
// one no parameter takes — is refused on open with one line naming the tensor. PretrainedWeights'
// transposed layout (GPT-2's Conv1D weights) is checked element range by element range.
package org.fsdp4j.weights;

import static org.fsdp4j.weights.SafetensorsFileTest.assertOneLine;
import static org.fsdp4j.weights.SafetensorsFileTest.resource;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.fsdp.FlatParamLayout;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.fsdp.FsdpEngine;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.fsdp.LocalFsdpGroup;
import org.fsdp4j.fsdp.ShardSlice;
import org.fsdp4j.model.DecoderModel;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.model.LlamaModel;
import org.fsdp4j.model.LlamaWeights;
import org.fsdp4j.model.ReferenceDump;
import org.fsdp4j.optim.SgdMomentum;
import org.fsdp4j.testing.Tolerances;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class LlamaWeightsTest {

    /** LlamaParityChecks' fp32 tolerances, as ·max|ref| (atol) and relative (rtol). */
    private static final double LOGITS_ATOL = 5e-6;
    private static final double LOGITS_RTOL = 1e-6;
    private static final double LOSS_RTOL = 1e-6;

    @TempDir
    Path dir;

    @ParameterizedTest(name = "N = {0}")
    @ValueSource(ints = {1, 4})
    void loadedWeightsGivePyTorchsLogitsShardedAnyWay(int worldSize) {
        ReferenceDump ref = ReferenceDump.load("/reference/llama_tiny_large.bin");
        LlamaConfig config = (LlamaConfig) ref.config();
        int b = ref.batchSize();
        int t = ref.seqLen();
        LogitsTap[] taps = new LogitsTap[worldSize];
        FsdpOptions fsdp = FsdpOptions.builder().worldSize(worldSize).collectiveTimeout(Duration.ofSeconds(30)).build();
        try (PretrainedWeights weights = LlamaWeights.open(resource("llama_tiny_large.safetensors"), config);
             LocalFsdpGroup group = new LocalFsdpGroup(fsdp, ctx -> taps[ctx.rank()] = new LogitsTap(
                     new LlamaModel(config, ctx.ops(), false)), new SgdMomentum(0.1f, 0.9f, 0f), weights,
                     Collections.nCopies(worldSize, Device.CPU), new BackendOptions(1, false), UnaryOperator.identity(),
                     new LocalGroup(worldSize, Duration.ofSeconds(30), LocalGroup.Dispatch.HOST_FUNCTIONS))) {
            assertShardsHold(group, weights, config);
            List<StepMetrics> results = group.stepEachRank(DecoderModel.batch(b, t, ref.ints("tokens"), ref.ints("targets")), 0.1f);
            double[] logits = new double[b * t * config.vocabSize()];
            int perRank = logits.length / worldSize;
            for (int r = 0; r < worldSize; r++) {
                for (int i = 0; i < perRank; i++) {
                    logits[r * perRank + i] = taps[r].logits[i];   // rank r ran sequences [r·B/N, (r+1)·B/N)
                }
            }
            double[] refLogits = widen(ref.floats("logits"));
            double scale = maxAbs(refLogits);
            Tolerances.assertClose("logits of the loaded model at N = " + worldSize, refLogits, logits,
                    LOGITS_ATOL * scale, LOGITS_RTOL, 0);
            double refLoss = ref.floats("loss")[0];
            assertEquals(refLoss, results.get(0).loss(), LOSS_RTOL * refLoss, "loss at N = " + worldSize);
            double err = 0;
            for (int i = 0; i < logits.length; i++) {
                err = Math.max(err, Math.abs(logits[i] - refLogits[i]));
            }
            System.out.printf("llama weights loaded at N = %d: logits max |err| %.3g·max|ref|, loss %.7f vs %.7f%n",
                    worldSize, err / scale, results.get(0).loss(), refLoss);
        }
    }

    @Test
    void bf16WeightsLoadWidenedExactlyAtFourRanks() {
        ReferenceDump ref = ReferenceDump.load("/reference/llama_tiny_large_bf16.bin");
        LlamaConfig config = (LlamaConfig) ref.config();
        FsdpOptions fsdp = FsdpOptions.builder().worldSize(4).collectiveTimeout(Duration.ofSeconds(30)).build();
        try (PretrainedWeights weights = LlamaWeights.open(resource("llama_tiny_large_bf16.safetensors"), config);
             LocalFsdpGroup group = new LocalFsdpGroup(fsdp, ctx -> new LlamaModel(config, ctx.ops(), false),
                     new SgdMomentum(0.1f, 0.9f, 0f), weights, Collections.nCopies(4, Device.CPU),
                     new BackendOptions(1, false), UnaryOperator.identity(),
                     new LocalGroup(4, Duration.ofSeconds(30), LocalGroup.Dispatch.HOST_FUNCTIONS))) {
            List<Map<String, float[]>> byRank = group.onEachRank((r, engine) -> masters(engine));
            for (String name : ref.paramNames()) {
                float[] want = ref.floats("param." + name);   // the bf16 weights, as fp32
                float[] got = new float[want.length];
                for (Map<String, float[]> rank : byRank) {
                    float[] part = rank.get(name);   // null where the rank holds none of it
                    for (int i = 0; part != null && i < part.length; i++) {
                        if (!Float.isNaN(part[i])) {
                            got[i] = part[i];
                        }
                    }
                }
                for (int i = 0; i < want.length; i++) {
                    assertEquals(want[i], got[i], name + "[" + i + "]");
                }
            }
        }
    }

    @Test
    void aCheckpointThatDoesNotFitIsRefusedNamingTheTensor() throws IOException {
        LlamaConfig config = new LlamaConfig(11, 8, 1, 2, 1, 8, 12, 10_000, 1e-5);
        SafetensorsWriter full = writerFor(config, null, null);
        Path ok = dir.resolve("ok.safetensors");
        full.write(ok);
        LlamaWeights.open(ok, config).close();

        Path missing = dir.resolve("missing.safetensors");
        writerFor(config, "model.layers.0.mlp.up_proj.weight", null).write(missing);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> LlamaWeights.open(missing, config)),
                "has no tensor model.layers.0.mlp.up_proj.weight");

        Path wrongShape = dir.resolve("shape.safetensors");
        writerFor(config, null, "model.layers.0.self_attn.k_proj.weight").write(wrongShape);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> LlamaWeights.open(wrongShape, config)),
                "tensor model.layers.0.self_attn.k_proj.weight has shape [8, 8], the model's "
                        + "model.layers.0.self_attn.k_proj.weight needs [4, 8]");

        Path truncated = dir.resolve("truncated.safetensors");
        full.write(truncated, UnaryOperator.identity(), full.bodyBytes() - 1);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LlamaWeights.open(truncated, config));
        assertOneLine(e, "is truncated: tensor ");
        assertTrue(e.getMessage().contains("lm_head.weight") || e.getMessage().contains("model."), e.getMessage());

        Path withRotary = dir.resolve("rotary.safetensors");   // older checkpoints carry these; fsdp4j recomputes them
        writerFor(config, null, null).add("model.layers.0.self_attn.rotary_emb.inv_freq", SafetensorsFile.Dtype.F32,
                new float[4], 4).write(withRotary);
        LlamaWeights.open(withRotary, config).close();

        Path ints = dir.resolve("ints.safetensors");
        writerFor(config, null, null).write(ints, h -> h.replace("\"lm_head.weight\":{\"dtype\":\"F32\"",
                "\"lm_head.weight\":{\"dtype\":\"I32\""), -1);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> LlamaWeights.open(ints, config)),
                "tensor lm_head.weight has dtype I32; fsdp4j reads F32, F16 and BF16");

        LlamaConfig fewerLayers = config;
        LlamaConfig twoLayers = new LlamaConfig(11, 8, 2, 2, 1, 8, 12, 10_000, 1e-5);
        Path bigger = dir.resolve("bigger.safetensors");
        writerFor(twoLayers, null, null).write(bigger);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> LlamaWeights.open(bigger, fewerLayers)),
                "holds tensor model.layers.1.");
    }

    @Test
    void aHuggingFaceDirectoryLoadsWholeOrSharded() throws IOException {
        LlamaConfig config = new LlamaConfig(11, 8, 1, 2, 1, 8, 12, 10_000, 1e-5);
        Path single = java.nio.file.Files.createDirectories(dir.resolve("single"));
        writerFor(config, null, null).write(single.resolve("model.safetensors"));
        Path sharded = java.nio.file.Files.createDirectories(dir.resolve("sharded"));
        SafetensorsWriter first = new SafetensorsWriter();
        SafetensorsWriter second = new SafetensorsWriter();
        StringBuilder weightMap = new StringBuilder();
        for (List<ParamSpec> unit : config.unitSpecs()) {
            for (ParamSpec p : unit) {
                boolean inFirst = p.name().startsWith("model.layers.");
                float[] v = new float[Math.toIntExact(p.numel())];
                java.util.Arrays.fill(v, inFirst ? 1 : 2);
                (inFirst ? first : second).add(p.name(), SafetensorsFile.Dtype.BF16, v, p.shape());
                weightMap.append(weightMap.length() == 0 ? "" : ",").append('"').append(p.name()).append("\":\"")
                        .append(inFirst ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors")
                        .append('"');
            }
        }
        first.write(sharded.resolve("model-00001-of-00002.safetensors"));
        second.write(sharded.resolve("model-00002-of-00002.safetensors"));
        java.nio.file.Files.writeString(sharded.resolve("model.safetensors.index.json"),
                "{\"metadata\":{\"total_size\":0},\"weight_map\":{" + weightMap + "}}");
        try (PretrainedWeights w = LlamaWeights.open(single, config)) {
            assertEquals(1, w.files().size());
        }
        try (PretrainedWeights w = LlamaWeights.open(sharded, config)) {
            assertEquals(2, w.files().size());
            ParamSpec q = config.unitSpecs().get(1).get(1);
            float[] out = new float[3];
            w.fill(q, 5, out, 0, 3);
            assertEquals(1f, out[2]);
            ParamSpec head = config.unitSpecs().get(0).get(2);
            w.fill(head, 0, out, 0, 3);
            assertEquals(2f, out[0]);
        }
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> LlamaWeights.open(dir, config)),
                "holds neither model.safetensors nor model.safetensors.index.json");
    }

    @Test
    void transposedTensorsFillAnyElementRange() throws IOException {
        int rows = 7;
        int cols = 5;
        float[] stored = new float[rows * cols];   // (cols, rows): the parameter (rows, cols) transposed
        for (int i = 0; i < stored.length; i++) {
            stored[i] = i;
        }
        Path p = dir.resolve("conv1d.safetensors");
        new SafetensorsWriter().add("c_fc.weight", SafetensorsFile.Dtype.F32, stored, cols, rows).write(p);
        ParamSpec spec = ParamSpec.normal("fc.weight", 0.02, true, rows, cols);
        try (PretrainedWeights w = PretrainedWeights.open(p, List.of(List.of(spec)),
                Map.of("fc.weight", TensorRef.transposed("c_fc.weight")), name -> false)) {
            for (int first = 0; first < rows * cols; first += 3) {
                for (int count = 1; first + count <= rows * cols; count += 4) {
                    float[] out = new float[count];
                    w.fill(spec, first, out, 0, count);
                    for (int i = 0; i < count; i++) {
                        int r = (first + i) / cols;
                        int c = (first + i) % cols;
                        assertEquals(stored[c * rows + r], out[i], "element " + (first + i));
                    }
                }
            }
        }
    }

    /** Every parameter of the config in a file, F32 with values 0, 1, ...; one left out or given the wrong shape. */
    private static SafetensorsWriter writerFor(LlamaConfig config, String leaveOut, String wrongShape) {
        SafetensorsWriter w = new SafetensorsWriter();
        for (List<ParamSpec> unit : config.unitSpecs()) {
            for (ParamSpec p : unit) {
                if (p.name().equals(leaveOut)) {
                    continue;
                }
                long[] shape = p.name().equals(wrongShape) ? new long[] {8, 8} : p.shape();
                float[] v = new float[Math.toIntExact(org.fsdp4j.api.Tensor.numelOf(shape))];
                for (int i = 0; i < v.length; i++) {
                    v[i] = i;
                }
                w.add(p.name(), SafetensorsFile.Dtype.F32, v, shape);
            }
        }
        return w;
    }

    /** This rank's master values by parameter name, whole-parameter sized, NaN where another rank holds them. */
    private static Map<String, float[]> masters(FsdpEngine engine) {
        Map<String, float[]> out = new java.util.HashMap<>();
        for (int u = 0; u < engine.layouts().size(); u++) {
            FsdpEngine.ShardView v = engine.shard(u);
            FlatParamLayout layout = v.layout();
            for (ShardSlice s : layout.slices(v.shardIndex())) {
                float[] whole = out.computeIfAbsent(s.spec().name(), n -> {
                    float[] a = new float[Math.toIntExact(s.spec().numel())];
                    java.util.Arrays.fill(a, Float.NaN);
                    return a;
                });
                for (int i = 0; i < s.numel(); i++) {
                    whole[Math.toIntExact(s.paramOffset() + i)] = v.master()[Math.toIntExact(s.shardOffset() + i)];
                }
            }
        }
        return out;
    }

    /** Every rank's master shard holds exactly the file's values for the elements it owns. */
    private static void assertShardsHold(LocalFsdpGroup group, PretrainedWeights weights, LlamaConfig config) {
        List<Map<String, float[]>> byRank = group.onEachRank((r, engine) -> masters(engine));
        for (List<ParamSpec> unit : config.unitSpecs()) {
            for (ParamSpec p : unit) {
                float[] want = new float[Math.toIntExact(p.numel())];
                weights.fill(p, 0, want, 0, want.length);
                int held = 0;
                for (Map<String, float[]> rank : byRank) {
                    float[] got = rank.get(p.name());
                    for (int i = 0; got != null && i < got.length; i++) {
                        if (!Float.isNaN(got[i])) {
                            assertEquals(want[i], got[i], p.name() + "[" + i + "]");
                            held++;
                        }
                    }
                }
                assertEquals(want.length, held, p.name() + ": elements held by the ranks together");
            }
        }
    }

    private static double[] widen(float[] x) {
        double[] d = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            d[i] = x[i];
        }
        return d;
    }

    private static double maxAbs(double[] x) {
        double m = 0;
        for (double v : x) {
            m = Math.max(m, Math.abs(v));
        }
        return m;
    }
}
