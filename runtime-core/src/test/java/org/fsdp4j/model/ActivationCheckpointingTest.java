// Activation checkpointing changes no result and saves memory: the same parameters and batch
// through a checkpointed and a plain model give bit-identical loss and gradients on the CPU
// backend, and a lower tracked peak of ACTIVATIONS bytes.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class ActivationCheckpointingTest {

    /** Loss, every gradient, and the peak activation bytes of one forward + backward. */
    private record Run(float loss, float[][] grads, long peakActivationBytes) {
    }

    @Test
    void gradientsAreBitIdenticalAndPeakActivationsDrop() {
        GradCheck gc = new GradCheck();
        GptConfig cfg = new GptConfig(64, 32, 4, 4, 32);
        int b = 2, t = 32;
        long paramSeed = gc.random.nextLong();
        int[] tokens = gc.tokens(b * t, cfg.vocabSize());
        int[] targets = gc.tokens(b * t, cfg.vocabSize());
        try (Backend be = GradCheck.cpuBackend();
             Tensor tok = GradCheck.upload(be, tokens, b, t);
             Tensor tgt = GradCheck.upload(be, targets, b, t)) {
            Run plain = run(be, cfg, false, paramSeed, tok, tgt);
            Run checkpointed = run(be, cfg, true, paramSeed, tok, tgt);

            assertEquals(Float.floatToIntBits(plain.loss), Float.floatToIntBits(checkpointed.loss),
                    "loss differs with checkpointing (seed " + gc.seed + ")");
            for (int i = 0; i < plain.grads.length; i++) {
                for (int j = 0; j < plain.grads[i].length; j++) {
                    if (Float.floatToIntBits(plain.grads[i][j]) != Float.floatToIntBits(checkpointed.grads[i][j])) {
                        fail("gradient " + i + "[" + j + "] differs with checkpointing: " + plain.grads[i][j]
                                + " vs " + checkpointed.grads[i][j] + " (seed " + gc.seed + ")");
                    }
                }
            }
            double saved = 1 - (double) checkpointed.peakActivationBytes / plain.peakActivationBytes;
            System.out.printf("activation checkpointing (%d layers, B=%d, T=%d, C=%d): peak activations %d -> %d bytes"
                            + " (%.1f%% lower)%n", cfg.numLayers(), b, t, cfg.embedDim(), plain.peakActivationBytes,
                    checkpointed.peakActivationBytes, 100 * saved);
            assertTrue(checkpointed.peakActivationBytes < plain.peakActivationBytes,
                    "checkpointing must lower the peak activation bytes: " + plain.peakActivationBytes + " -> "
                            + checkpointed.peakActivationBytes);
        }
    }

    private static Run run(Backend be, GptConfig cfg, boolean checkpoint, long seed, Tensor tok, Tensor tgt) {
        try (GptModel model = new GptModel(cfg, be, checkpoint);
             ParameterStore store = new ParameterStore(be, model.units())) {
            store.initialize(seed);
            be.memory().resetPeak();
            float loss = model.forward(tok, tgt, UnitHooks.NONE);
            model.backward(UnitHooks.NONE, 1f);
            long peak = be.memory().peakBytes(MemoryCategory.ACTIVATIONS);
            float[][] grads = new float[store.entries().size()][];
            for (int i = 0; i < grads.length; i++) {
                grads[i] = store.grad(store.entries().get(i).spec().name());
            }
            return new Run(loss, grads, peak);
        }
    }
}
