// The built-in model families and their named presets: `--model gpt|llama` picks the family,
// `--preset NAME` one of its shapes. Families may share preset names (both have tiny, small and
// bench-4x256, of comparable size), so a preset name means something only within its family. Each
// constant names its family's config type's presets and config.json reader, so nothing here (or
// anywhere outside a family's own files) asks which family it has.
package org.fsdp4j.model;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;
import java.util.function.Supplier;

public enum ModelFamily {
    /** GPT-2 (pre-LN, learned positions, GELU MLP, tied head): GptConfig. */
    GPT("gpt", GptConfig::preset, GptConfig::presetNames, GptConfig.FULL_SIZE_PRESET, HfGpt2Config::read),
    /** Llama (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, untied head): LlamaConfig. */
    LLAMA("llama", LlamaConfig::preset, LlamaConfig::presetNames, LlamaConfig.FULL_SIZE_PRESET, HfLlamaConfig::read);

    private final String cliName;
    private final Function<String, ModelConfig> preset;
    private final Supplier<List<String>> presetNames;
    private final String fullSizePreset;
    private final Function<Path, ModelConfig> reader;

    ModelFamily(String cliName, Function<String, ModelConfig> preset, Supplier<List<String>> presetNames,
                String fullSizePreset, Function<Path, ModelConfig> reader) {
        this.cliName = cliName;
        this.preset = preset;
        this.presetNames = presetNames;
        this.fullSizePreset = fullSizePreset;
        this.reader = reader;
    }

    /** The name `--model` takes. */
    public String cliName() {
        return cliName;
    }

    /** The preset called {@code name} of this family; an unknown name is an error that lists the known ones. */
    public ModelConfig preset(String name) {
        return preset.apply(name);
    }

    /** This family's preset names, in a stable order. */
    public List<String> presetNames() {
        return presetNames.get();
    }

    /** The preset of the published model the family's shapes follow (gpt2-124m, tinyllama-1.1b): what `fsdp4j plan` shows by default. */
    public String fullSizePreset() {
        return fullSizePreset;
    }

    /**
     * The model a Hugging Face config.json of this family describes (--model-config); a missing
     * file, bad JSON, a missing key, a feature the family lacks or an impossible shape is an
     * IllegalArgumentException naming the file and the problem.
     */
    public ModelConfig readHfConfig(Path file) {
        return reader.apply(file);
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
