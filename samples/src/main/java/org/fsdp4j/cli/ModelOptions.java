// The model flags `train`, the benchmarks and `plan` share: the family (--model gpt|llama), a
// preset's fields overridden one by one (--layers, --hidden, --heads, --vocab, --context), or a
// Hugging Face config.json of the family (--model-config). An impossible shape, or one past the
// limits of ModelConfig, is one line naming the flags.
package org.fsdp4j.cli;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import org.fsdp4j.model.ModelConfig;
import org.fsdp4j.model.ModelFamily;
import picocli.CommandLine.Option;

final class ModelOptions {

    @Option(names = "--model", paramLabel = "gpt|llama",
            description = "model family: gpt (GPT-2: LayerNorm, learned positions, GELU, tied head) or llama (RMSNorm,"
                    + " rotary positions, SwiGLU, grouped-query attention, untied head) (default: gpt)")
    String family;

    @Option(names = "--layers", paramLabel = "L", description = "transformer blocks, at most " + ModelConfig.MAX_LAYERS
            + " (overrides the preset's)")
    Integer layers;

    @Option(names = "--hidden", paramLabel = "C", description = "model width, at most " + ModelConfig.MAX_WIDTH
            + " (overrides the preset's)")
    Integer hidden;

    @Option(names = "--heads", paramLabel = "H", description = "attention heads; must divide --hidden; a Llama's key/value"
            + " heads must divide them (overrides the preset's)")
    Integer heads;

    @Option(names = "--vocab", paramLabel = "V", description = "vocabulary size, at most " + ModelConfig.MAX_VOCAB
            + " (overrides the preset's)")
    Integer vocab;

    @Option(names = "--context", paramLabel = "T", description = "context length, the longest --seq-len, at most "
            + ModelConfig.MAX_CONTEXT + " (overrides the preset's)")
    Integer context;

    @Option(names = "--model-config", paramLabel = "FILE",
            description = "a Hugging Face config.json instead of a preset: GPT-2's (n_layer, n_embd, n_head, vocab_size,"
                    + " n_positions), or with --model llama Llama's (hidden_size, intermediate_size, num_hidden_layers,"
                    + " num_attention_heads, num_key_value_heads, vocab_size, max_position_embeddings, rope_theta,"
                    + " rms_norm_eps)")
    Path modelConfig;

    /** The family --model names (gpt when not given); an unknown name is one line listing the known ones. */
    ModelFamily family() {
        return family == null ? ModelFamily.GPT : ModelFamily.parse(family);
    }

    /** Whether any shape flag here was given (--model only picks whose presets --preset names). */
    boolean given() {
        return layers != null || hidden != null || heads != null || vocab != null || context != null || modelConfig != null;
    }

    /**
     * Refuses --preset beside --model-config: both give the whole shape, and the preset was taken
     * and ignored. {@code preset} is the --preset flag's value, null when not given.
     */
    void refusePresetWithConfig(String preset) {
        if (preset != null && modelConfig != null) {
            throw new IllegalArgumentException("--preset " + preset + " and --model-config " + modelConfig
                    + " both give the model's shape: keep one");
        }
    }

    /** The shape: the family's {@code preset} (or --model-config's) with the overrides applied. */
    ModelConfig resolve(String preset) {
        ModelConfig base = modelConfig != null ? family().readHfConfig(modelConfig) : family().preset(preset);
        int l = bounded("--layers", layers, base.numLayers(), ModelConfig.MAX_LAYERS);
        int c = bounded("--hidden", hidden, base.embedDim(), ModelConfig.MAX_WIDTH);
        int h = bounded("--heads", heads, base.numHeads(), Integer.MAX_VALUE);   // the width bounds it: it must divide it
        int v = bounded("--vocab", vocab, base.vocabSize(), ModelConfig.MAX_VOCAB);
        int t = bounded("--context", context, base.maxSeqLen(), ModelConfig.MAX_CONTEXT);
        if (c % h != 0) {
            throw new IllegalArgumentException("the width " + c + (hidden != null ? " (--hidden)" : "") + " is not divisible by "
                    + h + " heads" + (heads != null ? " (--heads)" : "") + ": pick a head count that divides the width, e.g. "
                    + divisorNear(c, h));
        }
        Set<String> given = new HashSet<>();
        if (hidden != null) {
            given.add("--hidden");
        }
        if (heads != null) {
            given.add("--heads");
        }
        return base.withFlags(l, c, h, v, t, given);    // a family's own checks (a Llama's key/value heads, rotary pairs)
    }

    /** The flag's value within 1..max (the largest model fsdp4j takes: ModelConfig), or {@code otherwise} when not given. */
    private static int bounded(String flag, Integer value, int otherwise, int max) {
        if (value == null) {
            return otherwise;
        }
        if (value < 1) {
            throw new IllegalArgumentException(flag + " must be at least 1, got " + value);
        }
        return ModelConfig.checkDimension(flag, value, max);
    }

    private static int divisorNear(int c, int h) {
        for (int d = 0; d < h; d++) {
            if (h - d >= 1 && c % (h - d) == 0) {
                return h - d;
            }
            if (c % (h + d) == 0) {
                return h + d;
            }
        }
        return 1;
    }
}
