// Softmax cross-entropy averaged over all B·T positions. The backward overwrites the logits
// with their gradient in place (llm.c's trick), so the largest activation is never doubled.
package org.fsdp4j.api;


/**
 * Softmax cross-entropy averaged over all positions, the loss a {@link TrainableModel} writes.
 * The backward overwrites the logits with their gradient in place, so the largest activation is
 * never held twice.
 */
public final class CrossEntropyLoss {

    private CrossEntropyLoss() {
    }

    /**
     * losses (N) = per-position loss for logits (B, T, V) and targets (B, T) I32; mean (one F32
     * element) = their mean, on the device.
     *
     * @param backend the operations to issue on
     * @param logits  (N, V), any leading dimensions (B, T, V)
     * @param targets (N) I32 class indices, the same leading dimensions (B, T)
     * @param losses  (N) F32, each position's loss, overwritten
     * @param mean    one F32 element, overwritten with the mean loss
     */
    public static void forward(Ops backend, Tensor logits, Tensor targets, Tensor losses, Tensor mean) {
        int positions = Math.toIntExact(targets.numel());
        Tensor.requireShape(losses, "losses", positions);
        backend.crossEntropyForward(logits.reshape(positions, logits.dim(-1)), targets.reshape(positions), losses);
        backend.fill(mean, 0f);
        backend.sumInto(losses, 1f / positions, mean);
    }

    /**
     * logits (B, T, V) := d(lossScale · mean loss)/dlogits, overwriting the logits.
     *
     * @param backend   the operations to issue on
     * @param logits    (N, V), the forward's logits; overwritten with their gradient
     * @param targets   (N) I32, the forward's targets
     * @param lossScale the factor the mean loss is differentiated with (the backward's lossScale)
     */
    public static void backwardInPlace(Ops backend, Tensor logits, Tensor targets, float lossScale) {
        int positions = Math.toIntExact(targets.numel());
        Tensor flat = logits.reshape(positions, logits.dim(-1));
        backend.crossEntropyBackward(flat, targets.reshape(positions), lossScale / positions, flat);
    }
}
