// Pretrained weights for a built-in model, whatever its family: the one place that knows which
// family reads which checkpoint layout (the Llama: LlamaWeights, Hugging Face's names as they are;
// the GPT: Gpt2Weights, Hugging Face's GPT-2 names with its Conv1D weights read transposed).
// The trainer's --init-from opens its weights here, checked against the run's model before the
// first step.
package org.fsdp4j.weights;

import java.nio.file.Path;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.model.ModelConfig;

public final class FamilyWeights {

    private FamilyWeights() {
    }

    /**
     * The weights at {@code location} (a .safetensors file, or a directory with model.safetensors
     * or model.safetensors.index.json) for a model of {@code model}'s family and shape, every
     * parameter's tensor checked; a location or file that does not fit is one line naming it.
     */
    public static PretrainedWeights open(Path location, ModelConfig model) {
        if (model instanceof LlamaConfig llama) {
            return LlamaWeights.open(location, llama);
        }
        if (model instanceof GptConfig gpt) {
            return Gpt2Weights.open(location, gpt);
        }
        throw new IllegalArgumentException("the " + model.family() + " family has no safetensors mapping");
    }
}
