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
// Its keys are listed once (KEYS); what every family's reader does is HfConfigReader's.
package org.fsdp4j.model;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

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

    /**
     * The keys that give the shape, in config.json's order: the integers it must have, and
     * num_key_value_heads, rope_theta and rms_norm_eps, which have defaults (as LlamaConfig's do).
     */
    static final List<HfKey<HfLlamaConfig>> KEYS = List.of(
            new HfKey<>("vocab_size", "--vocab", HfLlamaConfig::vocabSize, true),
            new HfKey<>("max_position_embeddings", "--context", HfLlamaConfig::maxPositionEmbeddings, true),
            new HfKey<>("num_hidden_layers", "--layers", HfLlamaConfig::numHiddenLayers, true),
            new HfKey<>("num_attention_heads", "--heads", HfLlamaConfig::numAttentionHeads, true),
            new HfKey<>("num_key_value_heads", null, HfLlamaConfig::numKeyValueHeads, false),
            new HfKey<>("hidden_size", "--hidden", HfLlamaConfig::hiddenSize, true),
            new HfKey<>("intermediate_size", null, HfLlamaConfig::intermediateSize, true),
            new HfKey<>("rope_theta", null, HfLlamaConfig::ropeTheta, false),
            new HfKey<>("rms_norm_eps", null, HfLlamaConfig::rmsNormEps, false));

    /**
     * The features fsdp4j's Llama does not have, in the order they are checked, and the value of
     * each it takes (a null value is always taken): false, or SwiGluMlp's SiLU.
     */
    private static final Map<String, Predicate<JsonNode>> UNSUPPORTED = new LinkedHashMap<>();

    static {
        for (String key : new String[] {"rope_scaling", "tie_word_embeddings", "attention_bias", "mlp_bias",
            "sliding_window"}) {
            UNSUPPORTED.put(key, n -> n.isBoolean() && !n.booleanValue());
        }
        UNSUPPORTED.put("hidden_act", n -> n.asText().equals("silu"));
    }

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
    public ModelFamily family() {
        return ModelFamily.LLAMA;
    }

    @Override
    public String typeName() {
        return "llama";
    }

    @Override
    public List<HfKey.Value> shape() {
        return HfKey.values(KEYS, this);
    }

    /**
     * Reads a Hugging Face Llama config.json (num_key_value_heads defaults to num_attention_heads
     * and rope_theta to 10000, as LlamaConfig's do). A missing file, bad JSON, a missing or
     * non-integer key, a feature fsdp4j's Llama lacks, or an impossible shape is an
     * IllegalArgumentException naming the file and the problem.
     */
    public static LlamaConfig read(Path file) {
        JsonNode root = HfConfigReader.object(file);
        JsonNode type = root.get("model_type");
        if (type != null && !type.asText().equals("llama")) {
            throw HfConfigReader.refused(file, "model_type is '" + type.asText()
                    + "', not llama (for a GPT-2 config.json use --model gpt)");
        }
        Map<String, Integer> v = HfConfigReader.requiredInts(root, file, KEYS, "Llama");
        // the shape is checked here in config.json's names, which the user wrote (LlamaConfig names its fields)
        HfConfigReader.requirePositive(file, v);
        HfConfigReader.refuseUnsupported(root, file, UNSUPPORTED, JsonNode::toString, "Llama");
        int heads = v.get("num_attention_heads");
        int hidden = v.get("hidden_size");
        JsonNode headDim = root.get("head_dim");              // fsdp4j's head size is hidden_size / num_attention_heads
        if (headDim != null && !headDim.isNull() && !(headDim.isIntegralNumber() && heads > 0 && hidden % heads == 0
                && headDim.longValue() == hidden / heads)) {
            throw HfConfigReader.refused(file, "head_dim is " + headDim + ", which fsdp4j's"
                    + " Llama does not support (its head size is hidden_size / num_attention_heads)");
        }
        JsonNode kv = root.get("num_key_value_heads");
        JsonNode theta = root.get("rope_theta");
        JsonNode eps = root.get("rms_norm_eps");
        // Jackson reads a string, a fraction or an object as some number (0, 2 for 2.7): the optional keys too must be what they say.
        if (kv != null && !kv.isNull() && !(kv.isIntegralNumber() && kv.canConvertToInt())) {
            throw HfConfigReader.refused(file, "num_key_value_heads is " + kv + ", not an integer");
        }
        for (String key : new String[] {"rope_theta", "rms_norm_eps"}) {
            JsonNode n = root.get(key);
            if (n != null && !n.isNull() && !n.isNumber()) {
                throw HfConfigReader.refused(file, key + " is " + n + ", not a number");
            }
        }
        int kvHeads = kv == null || kv.isNull() ? heads : kv.intValue();
        double ropeTheta = theta == null || theta.isNull() ? 10_000 : theta.doubleValue();
        double normEps = eps == null || eps.isNull() ? 1e-6 : eps.doubleValue();
        String problem = kvHeads < 1 ? "num_key_value_heads must be at least 1, got " + kvHeads
                : hidden % heads != 0 ? "hidden_size " + hidden + " is not divisible by num_attention_heads " + heads
                        + ": pick a num_attention_heads that divides hidden_size"
                : heads % kvHeads != 0 ? "num_key_value_heads " + kvHeads + " does not divide num_attention_heads " + heads
                        + ": each key/value head serves a whole group of query heads"
                : (hidden / heads) % 2 != 0 ? "the head size " + hidden / heads + " (hidden_size " + hidden
                        + " / num_attention_heads " + heads + ") is odd: rotary embeddings turn pairs of dims, so it must be even"
                : !(ropeTheta > 1) || !Double.isFinite(ropeTheta) ? "rope_theta must be a finite number above 1, got " + theta
                : !(normEps > 0) || !(normEps < 1) ? "rms_norm_eps must be between 0 and 1, got " + eps
                : null;
        if (problem != null) {
            throw HfConfigReader.refused(file, problem);
        }
        return HfConfigReader.build(file, () -> new HfLlamaConfig("llama", v.get("vocab_size"),
                v.get("max_position_embeddings"), v.get("num_hidden_layers"), heads, kvHeads, hidden,
                v.get("intermediate_size"), ropeTheta, normEps).toModelConfig());
    }

    @Override
    public String toString() {
        return "llama: vocab_size " + vocabSize + ", max_position_embeddings " + maxPositionEmbeddings
                + ", num_hidden_layers " + numHiddenLayers + ", num_attention_heads " + numAttentionHeads
                + ", num_key_value_heads " + numKeyValueHeads + ", hidden_size " + hiddenSize + ", intermediate_size "
                + intermediateSize + ", rope_theta " + ropeTheta + ", rms_norm_eps " + rmsNormEps;
    }
}
