// Softmax cross-entropy averaged over all B·T positions. The backward overwrites the logits
// with their gradient in place (llm.c's trick), so the largest activation is never doubled.
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class CrossEntropyLoss {

    private CrossEntropyLoss() {
    }

    /**
     * losses (N) = per-position loss for logits (B, T, V) and targets (B, T) I32; mean (one F32
     * element) = their mean, on the device.
     */
    static void forward(Ops backend, Tensor logits, Tensor targets, Tensor losses, Tensor mean) {
        int positions = Math.toIntExact(targets.numel());
        Buffers.requireShape(losses, "losses", positions);
        backend.crossEntropyForward(logits.reshape(positions, logits.dim(-1)), targets.reshape(positions), losses);
        backend.fill(mean, 0f);
        backend.sumInto(losses, 1f / positions, mean);
    }

    /** logits (B, T, V) := d(lossScale · mean loss)/dlogits, overwriting the logits. */
    static void backwardInPlace(Ops backend, Tensor logits, Tensor targets, float lossScale) {
        int positions = Math.toIntExact(targets.numel());
        Tensor flat = logits.reshape(positions, logits.dim(-1));
        backend.crossEntropyBackward(flat, targets.reshape(positions), lossScale / positions, flat);
    }
}
