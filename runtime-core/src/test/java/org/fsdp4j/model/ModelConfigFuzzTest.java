// Fuzzes the model config JSON (issue 47, item 3): --model-config reads a Hugging Face
// config.json from anywhere. Random and mutated configs (keys removed, renamed, duplicated;
// wrong types; huge, negative, fractional or past-long numbers; deep nesting; bit flips,
// truncation) must each give a model or the readers' one error, an IllegalArgumentException
// naming the file; never another exception, and never a model whose sizes the JSON did not hold
// as integers.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.fsdp4j.testing.Fuzz;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelConfigFuzzTest {

    private static final long SEED = 0xC0F16L;
    private static final String GPT2 = "{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":32,\"n_head\":4,"
            + "\"vocab_size\":256,\"n_positions\":64,\"activation_function\":\"gelu_new\",\"layer_norm_epsilon\":1e-05}";
    private static final String LLAMA = "{\"model_type\":\"llama\",\"vocab_size\":256,\"max_position_embeddings\":64,"
            + "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"hidden_size\":32,"
            + "\"intermediate_size\":64,\"rope_theta\":10000.0,\"rms_norm_eps\":1e-06,\"tie_word_embeddings\":false}";

    @TempDir
    Path dir;

    private int fuzz(long seed, String valid, java.util.function.Function<Path, ModelConfig> read) throws Exception {
        Path p = dir.resolve("config.json");
        Files.writeString(p, valid);
        read.apply(p);                                         // the fuzzer's starting point is valid
        Fuzz f = new Fuzz(seed);
        int ran = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> f.run(5_000, 1_000, 2_500,
                n -> n % 10 == 0 ? new Fuzz.Input(n, "random", f.randomBytes(100)) : f.mutateJson(n, valid),
                IllegalArgumentException.class, in -> {
                    Files.write(p, in.bytes());
                    read.apply(p);
                }), "seed " + seed);
        assertTrue(ran >= 1_000, "seed " + seed + ": only " + ran + " inputs");
        return ran;
    }

    @Test
    void gpt2ConfigsReadOrAreRefusedCleanly() throws Exception {
        fuzz(SEED, GPT2, HfGpt2Config::read);
    }

    @Test
    void llamaConfigsReadOrAreRefusedCleanly() throws Exception {
        fuzz(SEED + 1, LLAMA, HfLlamaConfig::read);
    }

    /** Optional Llama keys of the wrong type are refused, not read as 0 or rounded (2.7 heads). */
    @Test
    void llamaOptionalKeysOfTheWrongTypeAreRefused() throws Exception {
        Path p = dir.resolve("config.json");
        for (String bad : new String[] {"\"num_key_value_heads\":2.7", "\"num_key_value_heads\":\"2\"",
            "\"num_key_value_heads\":1e12", "\"rope_theta\":\"1e4\"", "\"rms_norm_eps\":[1e-6]"}) {
            String key = bad.substring(0, bad.indexOf(':'));
            Files.writeString(p, LLAMA.replaceFirst(key + ":[^,}]*", java.util.regex.Matcher.quoteReplacement(bad)));
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> HfLlamaConfig.read(p), bad);
            assertTrue(e.getMessage().contains(key.replace("\"", "")), e.getMessage());
        }
    }
}
