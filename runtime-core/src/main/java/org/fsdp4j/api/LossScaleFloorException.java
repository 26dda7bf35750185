// Thrown by the fp16 loss scaler when the gradients overflow at every scale down to its floor:
// no scale can fix them, so training has diverged. A typed error so the trainer can end the run
// as a divergence (exit code and summary) rather than report it as a bug.
package org.fsdp4j.api;

/**
 * Thrown by {@link ShardedModel#step} under fp16 when the gradients overflow at every loss scale
 * down to the scaler's floor: no scale can fix them, so training has diverged (lower the learning
 * rate, or train in bf16).
 */
public final class LossScaleFloorException extends IllegalStateException {

    private static final long serialVersionUID = 1L;

    /**
     * An exception with this message.
     *
     * @param message what overflowed, and at which scale
     */
    public LossScaleFloorException(String message) {
        super(message);
    }

    /**
     * Whether {@code t} or one of its causes is this exception (ranks wrap what they throw).
     *
     * @param t any throwable
     * @return true when the chain holds a LossScaleFloorException
     */
    public static boolean isCauseOf(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (c instanceof LossScaleFloorException) {
                return true;
            }
        }
        return false;
    }
}
