// The model's life between passes: a forward without backward (evaluation) is freed by the
// next forward or by close; backward without forward, a sequence longer than the context and
// mismatched batches are clear errors; a batch shorter than maxSeqLen works.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class GptModelLifecycleTest {

    @Test
    void forwardWithoutBackwardIsFreedAndRepeatable() {
        GradCheck gc = new GradCheck();
        GptConfig cfg = new GptConfig(23, 16, 2, 2, 8);
        int b = 3, t = 7;
        try (Backend be = GradCheck.cpuBackend();
             GptModel model = new GptModel(cfg, be, false);
             ParameterStore store = new ParameterStore(be, model.units());
             Tensor tok = GradCheck.upload(be, gc.tokens(b * t, cfg.vocabSize()), b, t);
             Tensor tgt = GradCheck.upload(be, gc.tokens(b * t, cfg.vocabSize()), b, t)) {
            store.initialize(gc.seed);
            float first = model.forward(tok, tgt, UnitHooks.NONE);
            long live = be.memory().liveBytes(MemoryCategory.ACTIVATIONS);
            assertTrue(live > 0, "a forward keeps its activations");
            assertEquals(3 * 7 * 23, model.logits().numel());
            float second = model.forward(tok, tgt, UnitHooks.NONE);
            assertEquals(first, second, 0f, "same parameters and batch, same loss");
            assertEquals(live, be.memory().liveBytes(MemoryCategory.ACTIVATIONS), "the first pass was freed");
            // a freshly initialised model predicts nearly uniformly: loss ≈ ln(V)
            assertEquals(Math.log(cfg.vocabSize()), first, 0.1, "initial loss");
            model.close();
            assertEquals(0, be.memory().liveBytes(MemoryCategory.ACTIVATIONS));
            assertThrows(IllegalStateException.class, model::logits);
            IllegalStateException noForward = assertThrows(IllegalStateException.class,
                    () -> model.backward(UnitHooks.NONE, 1f));
            assertTrue(noForward.getMessage().contains("without a forward"), noForward.getMessage());
        }
    }

    @Test
    void badBatchesAreRejected() {
        GptConfig cfg = new GptConfig(23, 4, 1, 2, 8);
        try (Backend be = GradCheck.cpuBackend();
             GptModel model = new GptModel(cfg, be, false);
             ParameterStore store = new ParameterStore(be, model.units());
             Tensor longTokens = GradCheck.upload(be, new int[10], 2, 5);
             Tensor shortTokens = GradCheck.upload(be, new int[8], 2, 4);
             Tensor otherShape = GradCheck.upload(be, new int[8], 4, 2);
             Tensor floats = GradCheck.upload(be, new float[8], 2, 4)) {
            IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
                    () -> model.forward(longTokens, longTokens, UnitHooks.NONE));
            assertTrue(tooLong.getMessage().contains("maxSeqLen 4"), tooLong.getMessage());
            assertThrows(IllegalArgumentException.class, () -> model.forward(shortTokens, otherShape, UnitHooks.NONE));
            assertThrows(IllegalArgumentException.class, () -> model.forward(floats, floats, UnitHooks.NONE));
            assertEquals(0, be.memory().liveBytes(MemoryCategory.ACTIVATIONS), "a rejected batch allocates nothing");
        }
    }
}
