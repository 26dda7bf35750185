// Reading a Hugging Face config.json for --model-config, the part every family shares: the file as
// a JSON object, the keys it must hold as integers, the keys that would ask for a model the family
// does not build, the sizes at least 1, and each problem as one line naming the file, so a family's
// reader (HfGpt2Config.read, HfLlamaConfig.read) states only what is its own.
package org.fsdp4j.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.Supplier;

final class HfConfigReader {

    private HfConfigReader() {
    }

    /** {@code problem} as the one line --model-config's errors are: "--model-config FILE: problem". */
    static IllegalArgumentException refused(Path file, String problem) {
        return new IllegalArgumentException("--model-config " + file + ": " + problem);
    }

    /** The file's JSON object; a missing file, bad JSON or another JSON value is refused. */
    static JsonNode object(Path file) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(Files.readString(file));
        } catch (java.nio.file.NoSuchFileException e) {
            throw refused(file, "no such file");
        } catch (IOException e) {
            throw refused(file, "not valid JSON (" + e.getMessage().lines().findFirst().orElse("") + ")");
        }
        if (root == null || !root.isObject()) {
            throw refused(file, "not a JSON object");
        }
        return root;
    }

    /**
     * The values of {@code keys}' required keys, by name; one missing or not an integer refuses the
     * file naming every such key and what a {@code kind} ("GPT-2", "Llama") config.json has.
     */
    static <C> Map<String, Integer> requiredInts(JsonNode root, Path file, List<HfKey<C>> keys, String kind) {
        List<String> names = HfKey.required(keys);
        List<String> missing = new ArrayList<>();
        Map<String, Integer> v = new LinkedHashMap<>();
        for (String name : names) {
            JsonNode n = root.get(name);
            if (n == null || !n.isIntegralNumber() || !n.canConvertToInt()) {
                missing.add(name);
            } else {
                v.put(name, n.intValue());
            }
        }
        if (!missing.isEmpty()) {
            throw refused(file, String.join(", ", missing) + (missing.size() == 1 ? " is" : " are")
                    + " missing or not an integer (a " + kind + " config.json has " + String.join(", ", names) + ")");
        }
        return v;
    }

    /** Refuses a value below 1, naming its key (config.json's name, which the user wrote), in {@code v}'s order. */
    static void requirePositive(Path file, Map<String, Integer> v) {
        for (Map.Entry<String, Integer> e : v.entrySet()) {
            if (e.getValue() < 1) {
                throw refused(file, e.getKey() + " must be at least 1, got " + e.getValue());
            }
        }
    }

    /**
     * Refuses, in {@code accepted}'s order, the first key present (and not null) whose value its
     * predicate does not accept: "KEY is VALUE, which fsdp4j's {@code model} does not support",
     * the value as {@code shown} writes it.
     */
    static void refuseUnsupported(JsonNode root, Path file, Map<String, Predicate<JsonNode>> accepted,
                                  Function<JsonNode, String> shown, String model) {
        for (Map.Entry<String, Predicate<JsonNode>> k : accepted.entrySet()) {
            JsonNode n = root.get(k.getKey());
            if (n != null && !n.isNull() && !k.getValue().test(n)) {
                throw refused(file, k.getKey() + " is " + shown.apply(n) + ", which fsdp4j's " + model
                        + " does not support");
            }
        }
    }

    /** The model {@code build} makes, its refusal of an impossible shape given as the file's. */
    static <M extends ModelConfig> M build(Path file, Supplier<M> build) {
        try {
            return build.get();
        } catch (IllegalArgumentException e) {
            throw refused(file, e.getMessage());
        }
    }
}
