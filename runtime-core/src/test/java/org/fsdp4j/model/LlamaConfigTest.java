// Llama presets, validation, and the parameter count: TinyLlama-1.1B's known 1,100,048,384, and for
// every preset the sum of the model's declared parameter shapes, its units named as Hugging Face's.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Unit;
import org.junit.jupiter.api.Test;

class LlamaConfigTest {

    @Test
    void tinyLlamaHasItsKnownParameterCount() {
        assertEquals(1_100_048_384L, LlamaConfig.preset("tinyllama-1.1b").parameterCount());
    }

    @Test
    void parameterCountEqualsTheDeclaredShapes() {
        for (String name : LlamaConfig.presetNames()) {
            LlamaConfig cfg = LlamaConfig.preset(name);
            try (LlamaModel model = new LlamaModel(cfg.withSeqLen(16), null, false)) {
                long declared = model.units().stream().mapToLong(Unit::numel).sum();
                assertEquals(cfg.parameterCount(), declared, name);
                assertEquals(cfg.numLayers() + 1, model.units().size(), name);
            }
        }
        List<ParamSpec> root = LlamaConfig.preset("tiny").unitSpecs().get(0);
        assertEquals(List.of("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"),
                root.stream().map(ParamSpec::name).toList());
        assertEquals("model.layers.1.self_attn.k_proj.weight", LlamaConfig.preset("tiny").unitSpecs().get(2).get(2).name());
    }

    @Test
    void unknownPresetListsTheKnownOnes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LlamaConfig.preset("huge"));
        for (String name : LlamaConfig.presetNames()) {
            assertTrue(e.getMessage().contains(name), e.getMessage());
        }
        assertEquals(LlamaConfig.preset("small"), ModelFamily.parse("LLAMA").preset("small"));
    }

    @Test
    void invalidShapesAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> new LlamaConfig(256, 128, 2, 4, 3, 128, 352, 1e4, 1e-5));   // 3 ∤ 4
        assertEquals(32, new LlamaConfig(256, 128, 2, 3, 1, 96, 352, 1e4, 1e-5).headDim());                          // multi-query
        assertThrows(IllegalArgumentException.class, () -> new LlamaConfig(256, 128, 2, 4, 2, 12, 32, 1e4, 1e-5));    // D = 3, odd
        assertThrows(IllegalArgumentException.class, () -> new LlamaConfig(256, 128, 2, 4, 2, 128, 352, 1, 1e-5));    // theta
        assertThrows(IllegalArgumentException.class, () -> new LlamaConfig(256, 128, 2, 4, 2, 128, 352, 1e4, 0));     // eps
        assertThrows(IllegalArgumentException.class, () -> new LlamaConfig(256, 128, 2, 4, 2, 128, 0, 1e4, 1e-5));    // MLP
    }
}
