// Hugging Face GPT-2 checkpoints (the safetensors of GPT2LMHeadModel or GPT2Model) as a GptModel's
// starting weights. fsdp4j's GPT is GPT-2's architecture (pre-LN blocks, learned position embeddings,
// one fused qkv projection laid out [q | k | v], biases on every projection and LayerNorm, LayerNorm
// eps 1e-5, the tanh GELU that GPT-2's "gelu_new" is, attention scaled by 1/sqrt(head size), the LM
// head tied to wte), so every tensor has a counterpart; what differs is names and layout: GPT-2's
// projections are Conv1D layers whose weights are stored (in, out), the transpose of fsdp4j's
// Linear (out, in), and are read TRANSPOSED.
//
//   Hugging Face (GPT2Model)    stored         fsdp4j (GptModel)        fsdp4j shape  read
//   wte.weight                  (V, C)         wte                      (V, C)        as is        (root unit)
//   wpe.weight                  (P, C)         wpe                      (P, C)        as is        (root unit)
//   h.{i}.ln_1.weight, .bias    (C)            h.{i}.ln1.weight, .bias  (C)           as is        (block i)
//   h.{i}.attn.c_attn.weight    (C, 3C)        h.{i}.attn.qkv.weight    (3C, C)       TRANSPOSED
//   h.{i}.attn.c_attn.bias      (3C)           h.{i}.attn.qkv.bias      (3C)          as is
//   h.{i}.attn.c_proj.weight    (C, C)         h.{i}.attn.proj.weight   (C, C)        TRANSPOSED
//   h.{i}.attn.c_proj.bias      (C)            h.{i}.attn.proj.bias     (C)           as is
//   h.{i}.ln_2.weight, .bias    (C)            h.{i}.ln2.weight, .bias  (C)           as is
//   h.{i}.mlp.c_fc.weight       (C, 4C)        h.{i}.mlp.fc.weight      (4C, C)       TRANSPOSED
//   h.{i}.mlp.c_fc.bias         (4C)           h.{i}.mlp.fc.bias        (4C)          as is
//   h.{i}.mlp.c_proj.weight     (4C, C)        h.{i}.mlp.proj.weight    (C, 4C)       TRANSPOSED
//   h.{i}.mlp.c_proj.bias       (C)            h.{i}.mlp.proj.bias      (C)           as is
//   ln_f.weight, .bias          (C)            lnf.weight, .bias        (C)           as is        (root unit)
//   h.{i}.attn.bias             (1, 1, P, P)   — the causal mask buffer: ignored (fsdp4j masks the same way)
//   h.{i}.attn.masked_bias      ()             — an old buffer (-1e4): ignored
//   lm_head.weight              (V, C)         — GPT2LMHeadModel's head, tied to wte: accepted only if it has
//                                                wte's shape and values, then ignored (fsdp4j's head is wte)
//
// GPT2LMHeadModel saves every name but lm_head.weight under "transformer." (transformer.wte.weight,
// ...), GPT2Model without it: a checkpoint is read with the prefix if it holds transformer.wte.weight,
// else without, and a tensor of the other naming is then one no parameter takes. Any other tensor (a
// larger model's layers, cross-attention's crossattention.* and ln_cross_attn.*, a classification head)
// is refused naming it, as is a tensor missing or of another shape (PretrainedWeights).
//
// The config must be the checkpoint's (Hugging Face's config.json: vocab_size → vocabSize, n_positions
// → maxSeqLen (wpe is read whole, so it cannot be lowered), n_layer → numLayers, n_head → numHeads,
// n_embd → embedDim); the shapes check all of these but numHeads. What the weights do not say, and
// fsdp4j's GPT fixes, is the caller's to confirm in config.json: activation_function "gelu_new" (or
// "gelu_pytorch_tanh", the same function), layer_norm_epsilon 1e-5, n_inner null (4C: the shapes
// catch any other), scale_attn_weights true, scale_attn_by_inverse_layer_idx false,
// add_cross_attention false, tie_word_embeddings true. reorder_and_upcast_attn only changes rounding.
package org.fsdp4j.model;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.weights.PretrainedWeights;
import org.fsdp4j.weights.SafetensorsFile;
import org.fsdp4j.weights.TensorRef;

public final class Gpt2Weights {

    /** GPT2LMHeadModel's prefix of every GPT2Model name. */
    public static final String PREFIX = "transformer.";
    /** GPT2LMHeadModel's head, tied to wte. */
    public static final String LM_HEAD = "lm_head.weight";

    private static final Pattern BLOCK_PARAM = Pattern.compile("h\\.(\\d+)\\.(.+)");
    private static final Pattern BUFFER = Pattern.compile("(transformer\\.)?h\\.\\d+\\.attn\\.(bias|masked_bias)");
    /** Elements compared at a time when checking lm_head against wte. */
    private static final int CHUNK = 1 << 16;

    private static final Map<String, TensorRef> ROOT = Map.of(
            "wte", TensorRef.asIs("wte.weight"),
            "wpe", TensorRef.asIs("wpe.weight"),
            "lnf.weight", TensorRef.asIs("ln_f.weight"),
            "lnf.bias", TensorRef.asIs("ln_f.bias"));

    private static final Map<String, TensorRef> BLOCK = Map.ofEntries(
            Map.entry("ln1.weight", TensorRef.asIs("ln_1.weight")),
            Map.entry("ln1.bias", TensorRef.asIs("ln_1.bias")),
            Map.entry("attn.qkv.weight", TensorRef.transposed("attn.c_attn.weight")),
            Map.entry("attn.qkv.bias", TensorRef.asIs("attn.c_attn.bias")),
            Map.entry("attn.proj.weight", TensorRef.transposed("attn.c_proj.weight")),
            Map.entry("attn.proj.bias", TensorRef.asIs("attn.c_proj.bias")),
            Map.entry("ln2.weight", TensorRef.asIs("ln_2.weight")),
            Map.entry("ln2.bias", TensorRef.asIs("ln_2.bias")),
            Map.entry("mlp.fc.weight", TensorRef.transposed("mlp.c_fc.weight")),
            Map.entry("mlp.fc.bias", TensorRef.asIs("mlp.c_fc.bias")),
            Map.entry("mlp.proj.weight", TensorRef.transposed("mlp.c_proj.weight")),
            Map.entry("mlp.proj.bias", TensorRef.asIs("mlp.c_proj.bias")));

    private Gpt2Weights() {
    }

    /**
     * fsdp4j's parameter name → the checkpoint tensor holding it, for a model of {@code config}, with
     * every tensor name prefixed by {@code prefix} ("" for GPT2Model's names, {@link #PREFIX} for
     * GPT2LMHeadModel's).
     */
    public static Map<String, TensorRef> mapping(GptConfig config, String prefix) {
        Map<String, TensorRef> m = new LinkedHashMap<>();
        for (List<ParamSpec> unit : config.unitSpecs()) {
            for (ParamSpec p : unit) {
                TensorRef ref = ROOT.get(p.name());
                String blockPrefix = "";
                if (ref == null) {
                    Matcher b = BLOCK_PARAM.matcher(p.name());
                    if (b.matches()) {
                        ref = BLOCK.get(b.group(2));
                        blockPrefix = "h." + b.group(1) + ".";
                    }
                }
                if (ref == null) {
                    throw new IllegalStateException("GPT-2 checkpoints have no counterpart of fsdp4j's parameter "
                            + p.name() + ": Gpt2Weights' table needs updating");
                }
                m.put(p.name(), new TensorRef(prefix + blockPrefix + ref.tensor(), ref.layout()));
            }
        }
        return m;
    }

    /** The prefix a checkpoint holding {@code tensors} names its tensors with: {@link #PREFIX} if it holds transformer.wte.weight, else "". */
    public static String prefixOf(Set<String> tensors) {
        return tensors.contains(PREFIX + "wte.weight") ? PREFIX : "";
    }

    /**
     * The tensors a GPT-2 checkpoint may carry that no parameter takes: each block's attention mask
     * buffers (attn.bias, attn.masked_bias), and lm_head.weight, which {@link #open} checks equals wte.
     */
    public static boolean ignorable(String tensor) {
        return tensor.equals(LM_HEAD) || BUFFER.matcher(tensor).matches();
    }

    /**
     * The checkpoint at {@code location} (a .safetensors file or a Hugging Face model directory),
     * checked against {@code config}; an lm_head.weight in it must equal wte (fsdp4j's head is tied).
     */
    public static PretrainedWeights open(Path location, GptConfig config) {
        String[] prefix = new String[1];
        PretrainedWeights w = PretrainedWeights.open(location, config.unitSpecs(),
                tensors -> mapping(config, prefix[0] = prefixOf(tensors)), Gpt2Weights::ignorable);
        try {
            checkTiedHead(w, config, prefix[0] + "wte.weight");
            return w;
        } catch (RuntimeException e) {
            w.close();
            throw e;
        }
    }

    /** Refuses an lm_head.weight that is not wte: of another shape, a dtype fsdp4j does not read, or other values (an untied head). */
    private static void checkTiedHead(PretrainedWeights w, GptConfig config, String wteName) {
        SafetensorsFile headFile = fileHolding(w, LM_HEAD);
        if (headFile == null) {
            return;
        }
        SafetensorsFile.Entry head = headFile.entry(LM_HEAD);
        long[] want = {config.vocabSize(), config.embedDim()};
        if (!Arrays.equals(head.shape(), want)) {
            throw new IllegalArgumentException(headFile.path() + ": tensor " + LM_HEAD + " has shape "
                    + Arrays.toString(head.shape()) + ", the model's head (tied to wte) needs " + Arrays.toString(want));
        }
        headFile.requireReadable(head);
        SafetensorsFile wteFile = fileHolding(w, wteName);   // present: PretrainedWeights checked it
        long n = head.numel();
        float[] a = new float[(int) Math.min(n, CHUNK)];
        float[] b = new float[a.length];
        for (long first = 0; first < n; first += CHUNK) {
            int count = (int) Math.min(CHUNK, n - first);
            headFile.read(LM_HEAD, first, a, 0, count);
            wteFile.read(wteName, first, b, 0, count);
            for (int i = 0; i < count; i++) {
                if (Float.floatToIntBits(a[i]) != Float.floatToIntBits(b[i])) {
                    long e = first + i;
                    throw new IllegalArgumentException(headFile.path() + ": tensor " + LM_HEAD + " differs from "
                            + wteName + " (element [" + e / want[1] + ", " + e % want[1] + "]: " + a[i] + " vs " + b[i]
                            + "): an untied LM head, which fsdp4j's GPT cannot hold (its head is wte)");
                }
            }
        }
    }

    private static SafetensorsFile fileHolding(PretrainedWeights w, String tensor) {
        for (SafetensorsFile f : w.files()) {
            if (f.entry(tensor) != null) {
                return f;
            }
        }
        return null;
    }
}
