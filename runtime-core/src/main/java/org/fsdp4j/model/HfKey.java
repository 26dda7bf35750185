// One key of a family's Hugging Face config.json that gives the model's shape: its name, the
// command-line flag that sets it (none for what only a preset or --model-config sets), where a
// config record keeps its value, and whether config.json must have it. Each family lists its keys
// once (HfGpt2Config.KEYS, HfLlamaConfig.KEYS), and HfModelConfig's keys() and flags() and
// HfConfigReader's checks are written once over such a list.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * @param name     the key as config.json spells it
 * @param flag     the flag that sets it (--layers, --hidden, --heads, --vocab, --context), or null
 * @param value    the value in a family's config record
 * @param required whether config.json must hold it as an integer (the others have defaults)
 */
public record HfKey<C>(String name, String flag, Function<C, Number> value, boolean required) {

    /** The shape flags, in the order a message lists them. */
    static final List<String> FLAGS = List.of("--layers", "--hidden", "--heads", "--vocab", "--context");

    /** A key with its value in one config. */
    public record Value(String name, String flag, Number value) {
    }

    /** Every key of {@code keys} with its value in {@code config}, in the list's order. */
    static <C> List<Value> values(List<HfKey<C>> keys, C config) {
        List<Value> out = new ArrayList<>(keys.size());
        for (HfKey<C> k : keys) {
            out.add(new Value(k.name, k.flag, k.value.apply(config)));
        }
        return List.copyOf(out);
    }

    /** The names of the keys config.json must hold, in the list's order. */
    static <C> List<String> required(List<HfKey<C>> keys) {
        return keys.stream().filter(HfKey::required).map(HfKey::name).toList();
    }
}
