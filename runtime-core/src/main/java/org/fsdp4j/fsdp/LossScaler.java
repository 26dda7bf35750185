// Dynamic loss scaling for fp16 (as torch.amp's GradScaler and DeepSpeed do): the loss is
// multiplied by a scale before backward so small gradients survive fp16; a step whose gradients
// hold inf/NaN is skipped and the scale halved; after growthInterval good steps in a row the
// scale doubles. With bf16/fp32 the scale is fixed at 1; a step whose gradients are not finite
// is skipped there too (non-finite gradients never reach the parameters), and the trainer's
// NonFinitePolicy decides whether the run goes on.
package org.fsdp4j.fsdp;

import org.fsdp4j.api.LossScaleFloorException;

public final class LossScaler {

    /** Below this the gradients are non-finite for reasons no scale can fix (divergence, bad data). */
    private static final float MIN_SCALE = 0x1p-24f;

    private final boolean dynamic;
    private final int growthInterval;
    private float scale;
    private int goodSteps;

    private LossScaler(boolean dynamic, float initialScale, int growthInterval) {
        if (!(initialScale > 0) || !Float.isFinite(initialScale)) {
            throw new IllegalArgumentException("initial loss scale must be finite and > 0, got " + initialScale);
        }
        if (growthInterval < 1) {
            throw new IllegalArgumentException("loss-scale growth interval must be >= 1 step, got " + growthInterval);
        }
        this.dynamic = dynamic;
        this.scale = initialScale;
        this.growthInterval = growthInterval;
    }

    /** Scale starts at {@code initialScale} (2^16 is usual), doubles after {@code growthInterval} good steps. */
    public static LossScaler dynamic(float initialScale, int growthInterval) {
        return new LossScaler(true, initialScale, growthInterval);
    }

    /** A constant scale of 1. */
    public static LossScaler none() {
        return new LossScaler(false, 1f, 1);
    }

    public float scale() {
        return scale;
    }

    /** Finite steps in a row since the scale last changed (what a checkpoint keeps, with the scale). */
    public int goodSteps() {
        return goodSteps;
    }

    /** Continues from a saved scale and count of good steps (a checkpoint's); a fixed scale ignores them. */
    public void restore(float savedScale, int savedGoodSteps) {
        if (!dynamic) {
            return;
        }
        if (!(savedScale > 0) || !Float.isFinite(savedScale) || savedGoodSteps < 0) {
            throw new IllegalArgumentException("a saved loss scale must be finite and > 0 with good steps >= 0, got "
                    + savedScale + " and " + savedGoodSteps);
        }
        scale = savedScale;
        goodSteps = savedGoodSteps;
    }

    /** Whether a step whose gradients are {@code finite} or not must be skipped: whenever they are not. */
    public boolean skips(boolean finite) {
        return !finite;
    }

    /** Records the outcome of a step: halve on overflow, double after growthInterval finite steps in a row. */
    public void update(boolean finite) {
        if (!dynamic) {
            return;
        }
        if (!finite) {
            scale *= 0.5f;
            goodSteps = 0;
            if (scale < MIN_SCALE) {
                throw new LossScaleFloorException("loss scale fell below 2^-24: the gradients are non-finite at every "
                        + "scale, so training has diverged (lower the learning rate or use bf16)");
            }
            return;
        }
        if (++goodSteps == growthInterval) {
            scale *= 2f;
            goodSteps = 0;
        }
    }
}
