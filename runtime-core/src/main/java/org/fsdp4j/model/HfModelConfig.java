// A model's shape as Hugging Face's config.json spells it, whatever the family: GPT-2's keys
// (HfGpt2Config) or Llama's (HfLlamaConfig), told apart by "model_type"; each family lists its keys
// once (HfKey), and keys() and flags() are written here once over that list. What a checkpoint's index
// records and what the safetensors export's metadata carries, so a checkpoint names the family of
// the model it holds and a run of another family or shape is refused when it resumes.
package org.fsdp4j.model;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

@JsonTypeInfo(use = JsonTypeInfo.Id.NAME, include = JsonTypeInfo.As.EXISTING_PROPERTY, property = "model_type",
        visible = true, defaultImpl = HfGpt2Config.class)
@JsonSubTypes({@JsonSubTypes.Type(value = HfGpt2Config.class, name = "gpt2"),
        @JsonSubTypes.Type(value = HfLlamaConfig.class, name = "llama")})
public sealed interface HfModelConfig permits HfGpt2Config, HfLlamaConfig {

    /** The model this describes; an impossible shape is an IllegalArgumentException that says why. */
    ModelConfig toModelConfig();

    /** The family whose config.json this is. */
    ModelFamily family();

    /** model_type as config.json spells it (gpt2, llama). */
    String typeName();

    /** The keys that give the shape, with their values here, in config.json's order (the family's HfKey list). */
    List<HfKey.Value> shape();

    /** The keys and values as a config.json holds them (the safetensors export's metadata), model_type first. */
    default Map<String, String> keys() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("model_type", typeName());
        for (HfKey.Value k : shape()) {
            m.put(k.name(), String.valueOf(k.value()));
        }
        return m;
    }

    /**
     * The model as the command line's flags give it (--model, --layers, --hidden, --heads, --vocab,
     * --context), and as config.json keys what only --model-config or a preset sets: what a message
     * shows a user, who typed flags, not fsdp4j's field names.
     */
    default Map<String, String> flags() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("--model", family().cliName());
        for (String flag : HfKey.FLAGS) {
            for (HfKey.Value k : shape()) {
                if (flag.equals(k.flag())) {
                    m.put(flag, String.valueOf(k.value()));
                }
            }
        }
        for (HfKey.Value k : shape()) {
            if (k.flag() == null) {
                m.put(k.name(), k.value() instanceof Double d ? plain(d) : String.valueOf(k.value()));
            }
        }
        return m;
    }

    /** {@code x} as a person writes it: 10000, 0.5, 1e-5 (not 10000.0 or 1.0E-5). */
    static String plain(double x) {
        if (!Double.isFinite(x) || x == 0) {
            return x == 0 ? "0" : String.valueOf(x);
        }
        java.math.BigDecimal d = new java.math.BigDecimal(Double.toString(x)).stripTrailingZeros();
        if (Math.abs(x) >= 1e-3 && Math.abs(x) < 1e7) {
            return d.toPlainString();
        }
        String digits = d.unscaledValue().abs().toString();
        int exponent = d.precision() - d.scale() - 1;
        return (x < 0 ? "-" : "") + digits.charAt(0) + (digits.length() > 1 ? "." + digits.substring(1) : "") + "e" + exponent;
    }
}
