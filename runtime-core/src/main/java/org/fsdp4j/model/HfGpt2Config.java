// A GPT shape as Hugging Face's GPT-2 config.json spells it (n_layer, n_embd, n_head, vocab_size,
// n_positions): what --model-config reads, what a checkpoint's index records and what the
// safetensors export's metadata carries, so every tool describes a model the same way. Other
// keys of a config.json (activation, dropout, ...) are ignored: fsdp4j's GPT is GPT-2's block
// (pre-LN, tanh GELU, LayerNorm eps 1e-5, tied head) without dropout.
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
