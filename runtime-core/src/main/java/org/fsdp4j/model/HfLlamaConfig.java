// A Llama shape as Hugging Face's LlamaConfig (config.json) spells it: vocab_size,
// max_position_embeddings, num_hidden_layers, num_attention_heads, num_key_value_heads,
// hidden_size, intermediate_size, rope_theta, rms_norm_eps. What a Llama checkpoint's index records,
// what its safetensors export's metadata carries, and what --model-config reads for --model llama
// (so a Hugging Face model directory's config.json gives the shape its weights need). The features
// fsdp4j's Llama does not have are refused when read, naming the key: rope_scaling, tied
// embeddings, biases, a hidden_act other than silu, a sliding window, a head_dim other than
// hidden_size / num_attention_heads. Keys that do not change the model are ignored: dropout
// (fsdp4j trains without it), initializer_range, pretraining_tp (it only splits HF's matmuls),
// token ids, and bookkeeping (architectures, torch_dtype, transformers_version, use_cache, ...).
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
public record HfLlamaConfig(@JsonProperty("model_type") String modelType, @JsonProperty("vocab_size") int vocabSize,
                            @JsonProperty("max_position_embeddings") int maxPositionEmbeddings,
                            @JsonProperty("num_hidden_layers") int numHiddenLayers,
                            @JsonProperty("num_attention_heads") int numAttentionHeads,
                            @JsonProperty("num_key_value_heads") int numKeyValueHeads,
                            @JsonProperty("hidden_size") int hiddenSize,
                            @JsonProperty("intermediate_size") int intermediateSize,
                            @JsonProperty("rope_theta") double ropeTheta,
                            @JsonProperty("rms_norm_eps") double rmsNormEps) implements HfModelConfig {

    private static final String[] INT_KEYS = {"vocab_size", "max_position_embeddings", "num_hidden_layers",
        "num_attention_heads", "hidden_size", "intermediate_size"};

    /** The description of {@code c}. */
    public static HfLlamaConfig of(LlamaConfig c) {
        return new HfLlamaConfig("llama", c.vocabSize(), c.maxSeqLen(), c.numLayers(), c.numHeads(), c.numKvHeads(),
                c.embedDim(), c.hiddenDim(), c.ropeTheta(), c.normEps());
    }

    @Override
    public LlamaConfig toModelConfig() {
        return new LlamaConfig(vocabSize, maxPositionEmbeddings, numHiddenLayers, numAttentionHeads, numKeyValueHeads,
                hiddenSize, intermediateSize, ropeTheta, rmsNormEps);
    }

    @Override
    public Map<String, String> keys() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("model_type", "llama");
        m.put("vocab_size", String.valueOf(vocabSize));
        m.put("max_position_embeddings", String.valueOf(maxPositionEmbeddings));
        m.put("num_hidden_layers", String.valueOf(numHiddenLayers));
        m.put("num_attention_heads", String.valueOf(numAttentionHeads));
        m.put("num_key_value_heads", String.valueOf(numKeyValueHeads));
        m.put("hidden_size", String.valueOf(hiddenSize));
        m.put("intermediate_size", String.valueOf(intermediateSize));
        m.put("rope_theta", String.valueOf(ropeTheta));
        m.put("rms_norm_eps", String.valueOf(rmsNormEps));
        return m;
    }

    @Override
    public Map<String, String> flags() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("--model", "llama");
        m.put("--layers", String.valueOf(numHiddenLayers));
        m.put("--hidden", String.valueOf(hiddenSize));
        m.put("--heads", String.valueOf(numAttentionHeads));
        m.put("--vocab", String.valueOf(vocabSize));
        m.put("--context", String.valueOf(maxPositionEmbeddings));
        m.put("num_key_value_heads", String.valueOf(numKeyValueHeads));    // no flags: a preset's or --model-config's
        m.put("intermediate_size", String.valueOf(intermediateSize));
        m.put("rope_theta", HfModelConfig.plain(ropeTheta));
        m.put("rms_norm_eps", HfModelConfig.plain(rmsNormEps));
        return m;
    }

    /**
     * Reads a Hugging Face Llama config.json (num_key_value_heads defaults to num_attention_heads
     * and rope_theta to 10000, as LlamaConfig's do). A missing file, bad JSON, a missing or
     * non-integer key, a feature fsdp4j's Llama lacks, or an impossible shape is an
     * IllegalArgumentException naming the file and the problem.
     */
    public static LlamaConfig read(Path file) {
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
        if (type != null && !type.asText().equals("llama")) {
            throw new IllegalArgumentException("--model-config " + file + ": model_type is '" + type.asText()
                    + "', not llama (for a GPT-2 config.json use --model gpt)");
        }
        List<String> missing = new ArrayList<>();
        int[] v = new int[INT_KEYS.length];
        for (int i = 0; i < INT_KEYS.length; i++) {
            JsonNode n = root.get(INT_KEYS[i]);
            if (n == null || !n.isIntegralNumber() || !n.canConvertToInt()) {
                missing.add(INT_KEYS[i]);
            } else {
                v[i] = n.intValue();
            }
        }
        if (!missing.isEmpty()) {
            throw new IllegalArgumentException("--model-config " + file + ": " + String.join(", ", missing)
                    + (missing.size() == 1 ? " is" : " are") + " missing or not an integer (a Llama config.json has "
                    + String.join(", ", INT_KEYS) + ")");
        }
        // the shape is checked here in config.json's names, which the user wrote (LlamaConfig names its fields)
        for (int i = 0; i < INT_KEYS.length; i++) {
            if (v[i] < 1) {
                throw new IllegalArgumentException("--model-config " + file + ": " + INT_KEYS[i] + " must be at least 1, got "
                        + v[i]);
            }
        }
        for (String unsupported : new String[] {"rope_scaling", "tie_word_embeddings", "attention_bias", "mlp_bias",
            "sliding_window"}) {
            JsonNode n = root.get(unsupported);
            if (n != null && !n.isNull() && !(n.isBoolean() && !n.booleanValue())) {
                throw new IllegalArgumentException("--model-config " + file + ": " + unsupported + " is " + n
                        + ", which fsdp4j's Llama does not support");
            }
        }
        JsonNode act = root.get("hidden_act");                 // SwiGluMlp: SiLU
        if (act != null && !act.isNull() && !act.asText().equals("silu")) {
            throw new IllegalArgumentException("--model-config " + file + ": hidden_act is " + act
                    + ", which fsdp4j's Llama does not support");
        }
        JsonNode headDim = root.get("head_dim");              // fsdp4j's head size is hidden_size / num_attention_heads
        if (headDim != null && !headDim.isNull() && !(headDim.isIntegralNumber() && v[3] > 0 && v[4] % v[3] == 0
                && headDim.longValue() == v[4] / v[3])) {
            throw new IllegalArgumentException("--model-config " + file + ": head_dim is " + headDim + ", which fsdp4j's"
                    + " Llama does not support (its head size is hidden_size / num_attention_heads)");
        }
        JsonNode kv = root.get("num_key_value_heads");
        JsonNode theta = root.get("rope_theta");
        JsonNode eps = root.get("rms_norm_eps");
        // Jackson reads a string, a fraction or an object as some number (0, 2 for 2.7): the optional keys too must be what they say.
        if (kv != null && !kv.isNull() && !(kv.isIntegralNumber() && kv.canConvertToInt())) {
            throw new IllegalArgumentException("--model-config " + file + ": num_key_value_heads is " + kv
                    + ", not an integer");
        }
        for (String key : new String[] {"rope_theta", "rms_norm_eps"}) {
            JsonNode n = root.get(key);
            if (n != null && !n.isNull() && !n.isNumber()) {
                throw new IllegalArgumentException("--model-config " + file + ": " + key + " is " + n + ", not a number");
            }
        }
        int kvHeads = kv == null || kv.isNull() ? v[3] : kv.intValue();
        double ropeTheta = theta == null || theta.isNull() ? 10_000 : theta.doubleValue();
        double normEps = eps == null || eps.isNull() ? 1e-6 : eps.doubleValue();
        String problem = kvHeads < 1 ? "num_key_value_heads must be at least 1, got " + kvHeads
                : v[4] % v[3] != 0 ? "hidden_size " + v[4] + " is not divisible by num_attention_heads " + v[3]
                        + ": pick a num_attention_heads that divides hidden_size"
                : v[3] % kvHeads != 0 ? "num_key_value_heads " + kvHeads + " does not divide num_attention_heads " + v[3]
                        + ": each key/value head serves a whole group of query heads"
                : (v[4] / v[3]) % 2 != 0 ? "the head size " + v[4] / v[3] + " (hidden_size " + v[4] + " / num_attention_heads "
                        + v[3] + ") is odd: rotary embeddings turn pairs of dims, so it must be even"
                : !(ropeTheta > 1) || !Double.isFinite(ropeTheta) ? "rope_theta must be a finite number above 1, got " + theta
                : !(normEps > 0) || !(normEps < 1) ? "rms_norm_eps must be between 0 and 1, got " + eps
                : null;
        if (problem != null) {
            throw new IllegalArgumentException("--model-config " + file + ": " + problem);
        }
        try {
            return new LlamaConfig(v[0], v[1], v[2], v[3], kvHeads, v[4], v[5], ropeTheta, normEps);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--model-config " + file + ": " + e.getMessage());
        }
    }

    @Override
    public String toString() {
        return "llama: vocab_size " + vocabSize + ", max_position_embeddings " + maxPositionEmbeddings
                + ", num_hidden_layers " + numHiddenLayers + ", num_attention_heads " + numAttentionHeads
                + ", num_key_value_heads " + numKeyValueHeads + ", hidden_size " + hiddenSize + ", intermediate_size "
                + intermediateSize + ", rope_theta " + ropeTheta + ", rms_norm_eps " + rmsNormEps;
    }
}
