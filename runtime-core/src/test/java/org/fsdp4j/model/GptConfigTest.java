// Presets, validation, and the parameter count: GPT-2 124M's well-known 124,439,808 (tied head),
// and for every preset the sum of the model's declared parameter shapes.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.Unit;
import org.junit.jupiter.api.Test;

class GptConfigTest {

    @Test
    void gpt2SmallHasItsKnownParameterCount() {
        assertEquals(124_439_808L, GptConfig.preset("gpt2-124m").parameterCount());
    }

    @Test
    void parameterCountEqualsTheDeclaredShapes() {
        for (String name : GptConfig.presetNames()) {
            GptConfig cfg = GptConfig.preset(name);
            try (GptModel model = new GptModel(cfg, null, false)) {
                long declared = model.units().stream().mapToLong(Unit::numel).sum();
                assertEquals(cfg.parameterCount(), declared, name);
                assertEquals(cfg.numLayers() + 1, model.units().size(), name);
            }
        }
    }

    @Test
    void unknownPresetListsTheKnownOnes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> GptConfig.preset("huge"));
        for (String name : GptConfig.presetNames()) {
            assertTrue(e.getMessage().contains(name), e.getMessage());
        }
        assertTrue(e.getMessage().contains("huge"), e.getMessage());
    }

    @Test
    void invalidShapesAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> new GptConfig(256, 128, 2, 3, 128));   // 3 ∤ 128
        assertThrows(IllegalArgumentException.class, () -> new GptConfig(0, 128, 2, 4, 128));
        assertThrows(IllegalArgumentException.class, () -> new GptConfig(256, 128, -1, 4, 128));
        assertEquals(64, GptConfig.preset("tiny").withSeqLen(64).maxSeqLen());
    }
}
