// The built-in model families and their named presets: `--model gpt|llama` picks the family,
// `--preset NAME` one of its shapes. Families may share preset names (both have tiny, small and
// bench-4x256, of comparable size), so a preset name means something only within its family.
package org.fsdp4j.model;

import java.util.List;
import java.util.Locale;

public enum ModelFamily {
    /** GPT-2 (pre-LN, learned positions, GELU MLP, tied head): GptConfig. */
    GPT("gpt"),
    /** Llama (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, untied head): LlamaConfig. */
    LLAMA("llama");

    private final String cliName;

    ModelFamily(String cliName) {
        this.cliName = cliName;
    }

    /** The name `--model` takes. */
    public String cliName() {
        return cliName;
    }

    /** The preset called {@code name} of this family; an unknown name is an error that lists the known ones. */
    public ModelConfig preset(String name) {
        return this == GPT ? GptConfig.preset(name) : LlamaConfig.preset(name);
    }

    /** This family's preset names, in a stable order. */
    public List<String> presetNames() {
        return this == GPT ? GptConfig.presetNames() : LlamaConfig.presetNames();
    }

    /** The family called {@code name} (case-insensitive); an unknown name is an error that lists the known ones. */
    public static ModelFamily parse(String name) {
        for (ModelFamily f : values()) {
            if (f.cliName.equals(name.trim().toLowerCase(Locale.ROOT))) {
                return f;
            }
        }
        throw new IllegalArgumentException("unknown model '" + name + "': use --model gpt or --model llama");
    }

    @Override
    public String toString() {
        return cliName;
    }
}
