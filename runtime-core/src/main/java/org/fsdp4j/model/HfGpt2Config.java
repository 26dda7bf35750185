// A GPT shape as Hugging Face's GPT-2 config.json spells it (n_layer, n_embd, n_head, vocab_size,
// n_positions): what --model-config reads, what a checkpoint's index records and what the
// safetensors export's metadata carries, so every tool describes a model the same way. fsdp4j's GPT
// is GPT-2's block (pre-LN, tanh GELU, LayerNorm eps 1e-5, attention scaled by 1/sqrt(head size),
// MLP width 4C, tied head): a key that asks for another model (MODEL_KEYS) is refused naming it,
// so a config.json is never half taken. Keys that do not change the model are ignored: dropout
// (fsdp4j trains without it), initializer_range, token ids, n_ctx, the double-heads model's
// summary_*, and bookkeeping (architectures, torch_dtype, transformers_version, use_cache, ...).
// Its keys are listed once (KEYS); what every family's reader does is HfConfigReader's.
package org.fsdp4j.model;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Predicate;

@JsonIgnoreProperties(ignoreUnknown = true)
public record HfGpt2Config(@JsonProperty("model_type") String modelType, @JsonProperty("n_layer") int nLayer,
                           @JsonProperty("n_embd") int nEmbd, @JsonProperty("n_head") int nHead,
                           @JsonProperty("vocab_size") int vocabSize, @JsonProperty("n_positions") int nPositions)
        implements HfModelConfig {

    /** The keys that give the shape, each required, in config.json's order. */
    static final List<HfKey<HfGpt2Config>> KEYS = List.of(
            new HfKey<>("n_layer", "--layers", HfGpt2Config::nLayer, true),
            new HfKey<>("n_embd", "--hidden", HfGpt2Config::nEmbd, true),
            new HfKey<>("n_head", "--heads", HfGpt2Config::nHead, true),
            new HfKey<>("vocab_size", "--vocab", HfGpt2Config::vocabSize, true),
            new HfKey<>("n_positions", "--context", HfGpt2Config::nPositions, true));

    /** The keys of a GPT-2 config.json that change the model, and what fsdp4j's GPT takes for each; a null value is always taken. */
    private static final Map<String, Predicate<JsonNode>> MODEL_KEYS = new TreeMap<>(Map.of(
            "activation_function", n -> n.isTextual() && (n.asText().equals("gelu_new")
                    || n.asText().equals("gelu_pytorch_tanh")),                       // the same tanh GELU
            "layer_norm_epsilon", n -> n.isNumber() && n.doubleValue() == 1e-5,
            "scale_attn_weights", n -> n.isBoolean() && n.booleanValue(),
            "scale_attn_by_inverse_layer_idx", n -> n.isBoolean() && !n.booleanValue(),
            "add_cross_attention", n -> n.isBoolean() && !n.booleanValue(),
            "tie_word_embeddings", n -> n.isBoolean() && n.booleanValue(),
            "reorder_and_upcast_attn", JsonNode::isBoolean));                     // it only changes rounding

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
    public ModelFamily family() {
        return ModelFamily.GPT;
    }

    @Override
    public String typeName() {
        return "gpt2";
    }

    @Override
    public List<HfKey.Value> shape() {
        return HfKey.values(KEYS, this);
    }

    public GptConfig toGptConfig() {
        return new GptConfig(vocabSize, nPositions, nLayer, nHead, nEmbd);
    }

    /**
     * Reads a Hugging Face GPT-2 config.json. A missing file, bad JSON, a missing or non-integer
     * key, or an impossible shape is an IllegalArgumentException naming the file and the problem.
     */
    public static GptConfig read(Path file) {
        JsonNode root = HfConfigReader.object(file);
        JsonNode type = root.get("model_type");
        if (type != null && !type.isNull() && !type.asText().equals("gpt2")) {
            throw HfConfigReader.refused(file, "model_type is " + type + ", not gpt2"
                    + (type.asText().equals("llama") ? ": add --model llama" : ", which fsdp4j's GPT does not build"));
        }
        Map<String, Integer> v = HfConfigReader.requiredInts(root, file, KEYS, "GPT-2");
        HfConfigReader.refuseUnsupported(root, file, MODEL_KEYS,
                n -> n.isFloatingPointNumber() ? HfModelConfig.plain(n.doubleValue()) : n.toString(), "GPT");
        int embd = v.get("n_embd");
        int heads = v.get("n_head");
        JsonNode inner = root.get("n_inner");                  // null: 4 · n_embd, fsdp4j's MLP width
        if (inner != null && !inner.isNull() && !(inner.isIntegralNumber() && inner.longValue() == 4L * embd)) {
            throw HfConfigReader.refused(file, "n_inner is " + inner
                    + ", which fsdp4j's GPT does not support (its MLP is 4 x n_embd wide)");
        }
        // the sizes are checked here in config.json's names, which the user wrote (GptConfig names its fields)
        HfConfigReader.requirePositive(file, v);
        if (embd % heads != 0) {
            throw HfConfigReader.refused(file, "n_embd " + embd + " is not divisible by n_head " + heads
                    + ": pick an n_head that divides n_embd");
        }
        return HfConfigReader.build(file, () -> new HfGpt2Config("gpt2", v.get("n_layer"), embd, heads,
                v.get("vocab_size"), v.get("n_positions")).toGptConfig());
    }

    @Override
    public String toString() {
        return "n_layer " + nLayer + ", n_embd " + nEmbd + ", n_head " + nHead + ", vocab_size " + vocabSize
                + ", n_positions " + nPositions;
    }
}
