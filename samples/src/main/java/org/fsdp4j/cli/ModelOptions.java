// The model-shape flags `train`, the benchmarks and `plan` share: a preset's fields overridden one
// by one (--layers, --hidden, --heads, --vocab, --context), or a Hugging Face GPT-2 config.json
// (--model-config). An impossible shape is one line naming the flags.
package org.fsdp4j.cli;

import java.nio.file.Path;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.HfGpt2Config;
import picocli.CommandLine.Option;

final class ModelOptions {

    @Option(names = "--layers", paramLabel = "L", description = "transformer blocks (overrides the preset's)")
    Integer layers;

    @Option(names = "--hidden", paramLabel = "C", description = "model width (overrides the preset's)")
    Integer hidden;

    @Option(names = "--heads", paramLabel = "H", description = "attention heads; must divide --hidden (overrides the preset's)")
    Integer heads;

    @Option(names = "--vocab", paramLabel = "V", description = "vocabulary size (overrides the preset's)")
    Integer vocab;

    @Option(names = "--context", paramLabel = "T", description = "context length, the longest --seq-len (overrides the preset's)")
    Integer context;

    @Option(names = "--model-config", paramLabel = "FILE",
            description = "a Hugging Face GPT-2 config.json (n_layer, n_embd, n_head, vocab_size, n_positions) instead of a preset")
    Path modelConfig;

    /** Whether any flag here was given. */
    boolean given() {
        return layers != null || hidden != null || heads != null || vocab != null || context != null || modelConfig != null;
    }

    /** The shape: {@code preset}'s (or --model-config's) with the overrides applied. */
    GptConfig resolve(String preset) {
        GptConfig base = modelConfig != null ? HfGpt2Config.read(modelConfig) : GptConfig.preset(preset);
        int l = positive("--layers", layers, base.numLayers());
        int c = positive("--hidden", hidden, base.embedDim());
        int h = positive("--heads", heads, base.numHeads());
        int v = positive("--vocab", vocab, base.vocabSize());
        int t = positive("--context", context, base.maxSeqLen());
        if (c % h != 0) {
            throw new IllegalArgumentException("the width " + c + (hidden != null ? " (--hidden)" : "") + " is not divisible by "
                    + h + " heads" + (heads != null ? " (--heads)" : "") + ": pick a head count that divides the width, e.g. "
                    + divisorNear(c, h));
        }
        return new GptConfig(v, t, l, h, c);
    }

    private static int positive(String flag, Integer value, int otherwise) {
        if (value == null) {
            return otherwise;
        }
        if (value < 1) {
            throw new IllegalArgumentException(flag + " must be at least 1, got " + value);
        }
        return value;
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
