// Thrown by the fp16 loss scaler when the gradients overflow at every scale down to its floor:
// no scale can fix them, so training has diverged. A typed error so the trainer can end the run
// as a divergence (exit code and summary) rather than report it as a bug.
package org.fsdp4j.fsdp;

public final class LossScaleFloorException extends IllegalStateException {

    private static final long serialVersionUID = 1L;

    public LossScaleFloorException(String message) {
        super(message);
    }

    /** Whether {@code t} or one of its causes is this exception (ranks wrap what they throw). */
    public static boolean isCauseOf(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (c instanceof LossScaleFloorException) {
                return true;
            }
        }
        return false;
    }
}
