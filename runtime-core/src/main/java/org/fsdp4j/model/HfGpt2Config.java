// A GPT shape as Hugging Face's GPT-2 config.json spells it (n_layer, n_embd, n_head, vocab_size,
// n_positions): what --model-config reads, what a checkpoint's index records and what the
// safetensors export's metadata carries, so every tool describes a model the same way. fsdp4j's GPT
// is GPT-2's block (pre-LN, tanh GELU, LayerNorm eps 1e-5, attention scaled by 1/sqrt(head size),
// MLP width 4C, tied head): a key that asks for another model (MODEL_KEYS) is refused naming it,
// so a config.json is never half taken. Keys that do not change the model are ignored: dropout
// (fsdp4j trains without it), initializer_range, token ids, n_ctx, the double-heads model's
// summary_*, and bookkeeping (architectures, torch_dtype, transformers_version, use_cache, ...).
package org.fsdp4j.model;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

@JsonIgnoreProperties(ignoreUnknown = true)
public record HfGpt2Config(@JsonProperty("model_type") String modelType, @JsonProperty("n_layer") int nLayer,
                           @JsonProperty("n_embd") int nEmbd, @JsonProperty("n_head") int nHead,
                           @JsonProperty("vocab_size") int vocabSize, @JsonProperty("n_positions") int nPositions)
        implements HfModelConfig {

    private static final String[] KEYS = {"n_layer", "n_embd", "n_head", "vocab_size", "n_positions"};

    /** The keys of a GPT-2 config.json that change the model, and what fsdp4j's GPT takes for each; a null value is always taken. */
    private static final Map<String, java.util.function.Predicate<JsonNode>> MODEL_KEYS = Map.of(
            "activation_function", n -> n.isTextual() && (n.asText().equals("gelu_new")
                    || n.asText().equals("gelu_pytorch_tanh")),                       // the same tanh GELU
            "layer_norm_epsilon", n -> n.isNumber() && n.doubleValue() == 1e-5,
            "scale_attn_weights", n -> n.isBoolean() && n.booleanValue(),
            "scale_attn_by_inverse_layer_idx", n -> n.isBoolean() && !n.booleanValue(),
            "add_cross_attention", n -> n.isBoolean() && !n.booleanValue(),
            "tie_word_embeddings", n -> n.isBoolean() && n.booleanValue(),
            "reorder_and_upcast_attn", JsonNode::isBoolean);                      // it only changes rounding

    /** The description of {@code c}. */
    public static HfGpt2Config of(GptConfig c) {
        return new HfGpt2Config("gpt2", c.numLayers(), c.embedDim(), c.numHeads(), c.vocabSize(), c.maxSeqLen());
    }

    /** The model this describes; an impossible shape is an IllegalArgumentException that says why. */
    @Override
    public GptConfig toModelConfig() {
        return toGptConfig();
    }

    @Override
    public Map<String, String> keys() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("model_type", "gpt2");
        m.put("n_layer", String.valueOf(nLayer));
        m.put("n_embd", String.valueOf(nEmbd));
        m.put("n_head", String.valueOf(nHead));
        m.put("vocab_size", String.valueOf(vocabSize));
        m.put("n_positions", String.valueOf(nPositions));
        return m;
    }

    @Override
    public Map<String, String> flags() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("--model", "gpt");
        m.put("--layers", String.valueOf(nLayer));
        m.put("--hidden", String.valueOf(nEmbd));
        m.put("--heads", String.valueOf(nHead));
        m.put("--vocab", String.valueOf(vocabSize));
        m.put("--context", String.valueOf(nPositions));
        return m;
    }

    public GptConfig toGptConfig() {
        return new GptConfig(vocabSize, nPositions, nLayer, nHead, nEmbd);
    }

    /**
     * Reads a Hugging Face GPT-2 config.json. A missing file, bad JSON, a missing or non-integer
     * key, or an impossible shape is an IllegalArgumentException naming the file and the problem.
     */
    public static GptConfig read(Path file) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(Files.readString(file));
        } catch (java.nio.file.NoSuchFileException e) {
            throw new IllegalArgumentException("--model-config " + file + ": no such file");
        } catch (IOException e) {
            throw new IllegalArgumentException("--model-config " + file + ": not valid JSON ("
                    + e.getMessage().lines().findFirst().orElse("") + ")");
        }
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException("--model-config " + file + ": not a JSON object");
        }
        JsonNode type = root.get("model_type");
        if (type != null && !type.isNull() && !type.asText().equals("gpt2")) {
            throw new IllegalArgumentException("--model-config " + file + ": model_type is " + type + ", not gpt2"
                    + (type.asText().equals("llama") ? ": add --model llama" : ", which fsdp4j's GPT does not build"));
        }
        List<String> missing = new ArrayList<>();
        int[] v = new int[KEYS.length];
        for (int i = 0; i < KEYS.length; i++) {
            JsonNode n = root.get(KEYS[i]);
            if (n == null || !n.canConvertToInt() || !n.isIntegralNumber()) {
                missing.add(KEYS[i]);
            } else {
                v[i] = n.intValue();
            }
        }
        if (!missing.isEmpty()) {
            throw new IllegalArgumentException("--model-config " + file + ": " + String.join(", ", missing)
                    + (missing.size() == 1 ? " is" : " are") + " missing or not an integer (a GPT-2 config.json has "
                    + String.join(", ", KEYS) + ")");
        }
        for (Map.Entry<String, java.util.function.Predicate<JsonNode>> k : new java.util.TreeMap<>(MODEL_KEYS).entrySet()) {
            JsonNode n = root.get(k.getKey());
            if (n != null && !n.isNull() && !k.getValue().test(n)) {
                throw new IllegalArgumentException("--model-config " + file + ": " + k.getKey() + " is "
                        + (n.isFloatingPointNumber() ? HfModelConfig.plain(n.doubleValue()) : n.toString())
                        + ", which fsdp4j's GPT does not support");
            }
        }
        JsonNode inner = root.get("n_inner");                  // null: 4 · n_embd, fsdp4j's MLP width
        if (inner != null && !inner.isNull() && !(inner.isIntegralNumber() && inner.longValue() == 4L * v[1])) {
            throw new IllegalArgumentException("--model-config " + file + ": n_inner is " + inner
                    + ", which fsdp4j's GPT does not support (its MLP is 4 x n_embd wide)");
        }
        // the sizes are checked here in config.json's names, which the user wrote (GptConfig names its fields)
        for (int i = 0; i < KEYS.length; i++) {
            if (v[i] < 1) {
                throw new IllegalArgumentException("--model-config " + file + ": " + KEYS[i] + " must be at least 1, got " + v[i]);
            }
        }
        if (v[1] % v[2] != 0) {
            throw new IllegalArgumentException("--model-config " + file + ": n_embd " + v[1] + " is not divisible by n_head "
                    + v[2] + ": pick an n_head that divides n_embd");
        }
        try {
            return new GptConfig(v[3], v[4], v[0], v[2], v[1]);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--model-config " + file + ": " + e.getMessage());
        }
    }

    @Override
    public String toString() {
        return "n_layer " + nLayer + ", n_embd " + nEmbd + ", n_head " + nHead + ", vocab_size " + vocabSize
                + ", n_positions " + nPositions;
    }
}
