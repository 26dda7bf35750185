// Hugging Face GPT-2 weights: tools/reference/gpt2_hf_reference.py's checkpoints (GPT2LMHeadModel's
// state dict: names under "transformer.", Conv1D weights stored (in, out), the attn.bias mask buffers,
// lm_head.weight tied to wte; and GPT2Model's, without the prefix and the head) loaded into the FSDP
// engine at N = 1 and N = 4 give the logits and loss PyTorch computes from them (gpt2_hf_tiny.bin,
// within GptParityChecks' fp32 tolerances), every rank's master shard holding exactly the file's
// values, transposed where GPT-2 stores them transposed; and a checkpoint that does not fit — a tensor
// of another shape, missing, truncated, one no parameter takes, an untied head — is refused on open
// with one line naming the tensor and the file.
package org.fsdp4j.weights;

import static org.fsdp4j.weights.SafetensorsFileTest.assertOneLine;
import static org.fsdp4j.weights.SafetensorsFileTest.resource;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
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
import org.fsdp4j.model.Gpt2Weights;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.GptModel;
import org.fsdp4j.model.GptParityChecks;
import org.fsdp4j.model.ReferenceDump;
import org.fsdp4j.optim.SgdMomentum;
import org.fsdp4j.testing.Tolerances;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class Gpt2WeightsTest {

    private static final String WITH_HEAD = "gpt2_hf_tiny.safetensors";        // GPT2LMHeadModel: transformer.*, lm_head
    private static final String BASE = "gpt2_hf_tiny_base.safetensors";        // GPT2Model: no prefix, no head

    @TempDir
    Path dir;

    @ParameterizedTest(name = "{1} at N = {0}")
    @CsvSource({"1, " + WITH_HEAD, "4, " + WITH_HEAD, "1, " + BASE, "4, " + BASE})
    void huggingFaceGpt2GivesPyTorchsLogitsShardedAnyWay(int worldSize, String file) throws IOException {
        ReferenceDump ref = ReferenceDump.load("/reference/gpt2_hf_tiny.bin");
        GptConfig config = (GptConfig) ref.config();
        int b = ref.batchSize();
        int t = ref.seqLen();
        LogitsTap[] taps = new LogitsTap[worldSize];
        FsdpOptions fsdp = FsdpOptions.builder().worldSize(worldSize).collectiveTimeout(Duration.ofSeconds(30)).build();
        try (PretrainedWeights weights = Gpt2Weights.open(resource(file), config);
             LocalFsdpGroup group = new LocalFsdpGroup(fsdp, ctx -> taps[ctx.rank()] = new LogitsTap(
                     new GptModel(config, ctx.ops(), false)), new SgdMomentum(0.1f, 0.9f, 0f), weights,
                     Collections.nCopies(worldSize, Device.CPU), new BackendOptions(1, false), UnaryOperator.identity(),
                     new LocalGroup(worldSize, Duration.ofSeconds(30), LocalGroup.Dispatch.HOST_FUNCTIONS))) {
            assertShardsHoldTheFilesValues(group, resource(file), config);
            List<StepMetrics> results = group.stepEachRank(DecoderModel.batch(b, t, ref.ints("tokens"), ref.ints("targets")), 0.1f);
            double[] logits = new double[b * t * config.vocabSize()];
            int perRank = logits.length / worldSize;
            for (int r = 0; r < worldSize; r++) {
                for (int i = 0; i < perRank; i++) {
                    logits[r * perRank + i] = taps[r].logits[i];   // rank r ran sequences [r·B/N, (r+1)·B/N)
                }
            }
            float[] refFloats = ref.floats("logits");
            double[] refLogits = new double[refFloats.length];
            double scale = 0;
            for (int i = 0; i < refFloats.length; i++) {
                refLogits[i] = refFloats[i];
                scale = Math.max(scale, Math.abs(refLogits[i]));
            }
            double err = 0;
            for (int i = 0; i < logits.length; i++) {
                err = Math.max(err, Math.abs(logits[i] - refLogits[i]));
            }
            double refLoss = ref.floats("loss")[0];
            System.out.printf("gpt-2 weights (%s) loaded at N = %d: logits max |err| %.3g·max|ref| (tolerance %.0e·max|ref|"
                    + " + %.0e·|ref|), loss %.7f vs %.7f%n", file, worldSize, err / scale, GptParityChecks.LOGITS_ATOL,
                    GptParityChecks.LOGITS_RTOL, results.get(0).loss(), refLoss);
            Tolerances.assertClose("logits of GPT-2 " + file + " loaded at N = " + worldSize, refLogits, logits,
                    GptParityChecks.LOGITS_ATOL * scale, GptParityChecks.LOGITS_RTOL, 0);
            assertEquals(refLoss, results.get(0).loss(), GptParityChecks.LOSS_RTOL * refLoss, "loss at N = " + worldSize);
        }
    }

    @Test
    void theMappingIsHuggingFacesNamesConv1DWeightsTransposed() {
        GptConfig config = new GptConfig(11, 6, 1, 2, 8);
        Map<String, TensorRef> want = new LinkedHashMap<>();
        want.put("wte", TensorRef.asIs("transformer.wte.weight"));
        want.put("wpe", TensorRef.asIs("transformer.wpe.weight"));
        want.put("lnf.weight", TensorRef.asIs("transformer.ln_f.weight"));
        want.put("lnf.bias", TensorRef.asIs("transformer.ln_f.bias"));
        want.put("h.0.ln1.weight", TensorRef.asIs("transformer.h.0.ln_1.weight"));
        want.put("h.0.ln1.bias", TensorRef.asIs("transformer.h.0.ln_1.bias"));
        want.put("h.0.attn.qkv.weight", TensorRef.transposed("transformer.h.0.attn.c_attn.weight"));
        want.put("h.0.attn.qkv.bias", TensorRef.asIs("transformer.h.0.attn.c_attn.bias"));
        want.put("h.0.attn.proj.weight", TensorRef.transposed("transformer.h.0.attn.c_proj.weight"));
        want.put("h.0.attn.proj.bias", TensorRef.asIs("transformer.h.0.attn.c_proj.bias"));
        want.put("h.0.ln2.weight", TensorRef.asIs("transformer.h.0.ln_2.weight"));
        want.put("h.0.ln2.bias", TensorRef.asIs("transformer.h.0.ln_2.bias"));
        want.put("h.0.mlp.fc.weight", TensorRef.transposed("transformer.h.0.mlp.c_fc.weight"));
        want.put("h.0.mlp.fc.bias", TensorRef.asIs("transformer.h.0.mlp.c_fc.bias"));
        want.put("h.0.mlp.proj.weight", TensorRef.transposed("transformer.h.0.mlp.c_proj.weight"));
        want.put("h.0.mlp.proj.bias", TensorRef.asIs("transformer.h.0.mlp.c_proj.bias"));
        assertEquals(want, Gpt2Weights.mapping(config, Gpt2Weights.PREFIX));
        assertEquals(TensorRef.asIs("h.0.ln_1.bias"), Gpt2Weights.mapping(config, "").get("h.0.ln1.bias"));
        assertEquals(true, Gpt2Weights.ignorable("transformer.h.3.attn.bias"));
        assertEquals(true, Gpt2Weights.ignorable("h.0.attn.masked_bias"));
        assertEquals(false, Gpt2Weights.ignorable("h.0.attn.c_attn.bias"));
        assertEquals(false, Gpt2Weights.ignorable("h.0.crossattention.bias"));
    }

    @Test
    void aCheckpointThatDoesNotFitIsRefusedNamingTheTensorAndTheFile() throws IOException {
        GptConfig config = new GptConfig(11, 6, 2, 2, 8);
        Path ok = dir.resolve("ok.safetensors");
        hfCheckpoint(config, Gpt2Weights.PREFIX, null, null, true).write(ok);
        Gpt2Weights.open(ok, config).close();
        Path base = dir.resolve("base.safetensors");
        hfCheckpoint(config, "", null, null, false).write(base);
        Gpt2Weights.open(base, config).close();

        Path shape = dir.resolve("shape.safetensors");   // c_attn stored as a Linear (out, in), not as Conv1D (in, out)
        hfCheckpoint(config, Gpt2Weights.PREFIX, null, "transformer.h.1.attn.c_attn.weight", true).write(shape);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(shape, config)),
                shape + ": tensor transformer.h.1.attn.c_attn.weight has shape [24, 8], the model's "
                        + "h.1.attn.qkv.weight needs [8, 24] (stored transposed)");

        Path missing = dir.resolve("missing.safetensors");
        hfCheckpoint(config, Gpt2Weights.PREFIX, "transformer.h.0.mlp.c_fc.bias", null, true).write(missing);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(missing, config)),
                missing + " has no tensor transformer.h.0.mlp.c_fc.bias (for parameter h.0.mlp.fc.bias)");

        Path truncated = dir.resolve("truncated.safetensors");   // the last tensor in the body: transformer.wte.weight
        SafetensorsWriter full = hfCheckpoint(config, Gpt2Weights.PREFIX, null, null, true);
        full.write(truncated, UnaryOperator.identity(), full.bodyBytes() - 1);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(truncated, config)),
                truncated + " is truncated: tensor transformer.wte.weight needs bytes");

        Path extra = dir.resolve("extra.safetensors");   // a cross-attention layer fsdp4j's GPT does not have
        hfCheckpoint(config, Gpt2Weights.PREFIX, null, null, true)
                .add("transformer.h.0.crossattention.c_attn.weight", SafetensorsFile.Dtype.F32, new float[128], 8, 16)
                .write(extra);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(extra, config)),
                extra + " holds tensor transformer.h.0.crossattention.c_attn.weight, which no parameter of the model takes");

        Path mixed = dir.resolve("mixed.safetensors");   // a prefix-less tensor in a prefixed checkpoint
        hfCheckpoint(config, Gpt2Weights.PREFIX, null, null, true)
                .add("ln_f.bias", SafetensorsFile.Dtype.F32, new float[8], 8).write(mixed);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(mixed, config)),
                mixed + " holds tensor ln_f.bias, which no parameter of the model takes");

        Path bigger = dir.resolve("bigger.safetensors");   // a checkpoint of three layers for a two-layer model
        hfCheckpoint(new GptConfig(11, 6, 3, 2, 8), Gpt2Weights.PREFIX, null, null, true).write(bigger);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(bigger, config)),
                bigger + " holds tensor transformer.h.2.");

        Path untied = dir.resolve("untied.safetensors");
        SafetensorsWriter u = hfCheckpoint(config, Gpt2Weights.PREFIX, null, null, false);
        float[] head = values(11 * 8);
        head[8 * 3 + 5] += 1;
        u.add(Gpt2Weights.LM_HEAD, SafetensorsFile.Dtype.F32, head, 11, 8).write(untied);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(untied, config)),
                untied + ": tensor lm_head.weight differs from transformer.wte.weight (element [3, 5]");

        Path headShape = dir.resolve("head_shape.safetensors");
        hfCheckpoint(config, Gpt2Weights.PREFIX, null, null, false)
                .add(Gpt2Weights.LM_HEAD, SafetensorsFile.Dtype.F32, values(12 * 8), 12, 8).write(headShape);
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> Gpt2Weights.open(headShape, config)),
                headShape + ": tensor lm_head.weight has shape [12, 8], the model's head (tied to wte) needs [11, 8]");
    }

    /**
     * A GPT-2 checkpoint of {@code config} in Hugging Face's names and shapes (written out here, apart
     * from Gpt2Weights' table), F32 values 0, 1, ... in each tensor; the mask buffers of each block;
     * lm_head.weight (= wte) if {@code head}; one tensor left out, or stored (out, in) instead of (in, out).
     */
    private static SafetensorsWriter hfCheckpoint(GptConfig config, String prefix, String leaveOut, String linearLayout,
                                                  boolean head) {
        long v = config.vocabSize();
        long p = config.maxSeqLen();
        long c = config.embedDim();
        Map<String, long[]> shapes = new LinkedHashMap<>();
        shapes.put("wte.weight", new long[] {v, c});
        shapes.put("wpe.weight", new long[] {p, c});
        for (int i = 0; i < config.numLayers(); i++) {
            String h = "h." + i + ".";
            shapes.put(h + "ln_1.weight", new long[] {c});
            shapes.put(h + "ln_1.bias", new long[] {c});
            shapes.put(h + "attn.bias", new long[] {1, 1, p, p});
            shapes.put(h + "attn.masked_bias", new long[] {});
            shapes.put(h + "attn.c_attn.weight", new long[] {c, 3 * c});
            shapes.put(h + "attn.c_attn.bias", new long[] {3 * c});
            shapes.put(h + "attn.c_proj.weight", new long[] {c, c});
            shapes.put(h + "attn.c_proj.bias", new long[] {c});
            shapes.put(h + "ln_2.weight", new long[] {c});
            shapes.put(h + "ln_2.bias", new long[] {c});
            shapes.put(h + "mlp.c_fc.weight", new long[] {c, 4 * c});
            shapes.put(h + "mlp.c_fc.bias", new long[] {4 * c});
            shapes.put(h + "mlp.c_proj.weight", new long[] {4 * c, c});
            shapes.put(h + "mlp.c_proj.bias", new long[] {c});
        }
        shapes.put("ln_f.weight", new long[] {c});
        shapes.put("ln_f.bias", new long[] {c});
        SafetensorsWriter w = new SafetensorsWriter();
        for (Map.Entry<String, long[]> e : shapes.entrySet()) {
            String name = prefix + e.getKey();
            if (name.equals(leaveOut) || name.equals(prefix + "wte.weight")) {
                continue;   // wte goes last, so that a cut body truncates it
            }
            long[] s = name.equals(linearLayout) ? new long[] {e.getValue()[1], e.getValue()[0]} : e.getValue();
            w.add(name, SafetensorsFile.Dtype.F32, values(Math.toIntExact(Tensor.numelOf(s))), s);
        }
        if (head) {
            w.add(Gpt2Weights.LM_HEAD, SafetensorsFile.Dtype.F32, values(Math.toIntExact(v * c)), v, c);
        }
        w.add(prefix + "wte.weight", SafetensorsFile.Dtype.F32, values(Math.toIntExact(v * c)), v, c);
        return w;
    }

    private static float[] values(int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = i;
        }
        return x;
    }

    /**
     * Every rank's master shard holds the file's values for the elements it owns, each read here from
     * the file by Hugging Face's name and transposed here where GPT-2 stores the weight (in, out): the
     * Conv1D weights, recognised by name here, apart from Gpt2Weights' table.
     */
    private static void assertShardsHoldTheFilesValues(LocalFsdpGroup group, Path file, GptConfig config) {
        List<Map<String, float[]>> byRank = group.onEachRank((r, engine) -> masters(engine));
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            String prefix = f.entry("wte.weight") != null ? "" : Gpt2Weights.PREFIX;
            for (List<ParamSpec> unit : config.unitSpecs()) {
                for (ParamSpec p : unit) {
                    TensorRef ref = Gpt2Weights.mapping(config, prefix).get(p.name());
                    float[] stored = new float[Math.toIntExact(p.numel())];
                    f.read(ref.tensor(), 0, stored, 0, stored.length);
                    float[] want = stored;
                    if (ref.tensor().matches(".*\\.(c_attn|c_proj|c_fc)\\.weight")) {   // Conv1D: (in, out)
                        int rows = Math.toIntExact(p.shape()[0]);
                        int cols = Math.toIntExact(p.shape()[1]);
                        want = new float[stored.length];
                        for (int r = 0; r < rows; r++) {
                            for (int c = 0; c < cols; c++) {
                                want[r * cols + c] = stored[c * rows + r];
                            }
                        }
                    }
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
    }

    /** This rank's master values by parameter name, whole-parameter sized, NaN where another rank holds them. */
    private static Map<String, float[]> masters(FsdpEngine engine) {
        Map<String, float[]> out = new HashMap<>();
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
}
