// The scalars of one AdamW update, immutable, validated once per step rather than per buffer.
package org.fsdp4j.backend;

public record AdamWStep(float lr, float beta1, float beta2, float eps, float weightDecay,
                        int step, float gradScale) {
    public AdamWStep {
        if (!(lr >= 0) || !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps > 0)) {
            throw new IllegalArgumentException("AdamW needs lr >= 0, 0 <= beta < 1 and eps > 0; got lr=" + lr
                    + " beta1=" + beta1 + " beta2=" + beta2 + " eps=" + eps);
        }
        if (step < 1) {
            throw new IllegalArgumentException("AdamW step counts from 1, got " + step);
        }
    }

    /** The same step with another weight decay (0 for biases and norm gains). */
    public AdamWStep withWeightDecay(float wd) {
        return new AdamWStep(lr, beta1, beta2, eps, wd, step, gradScale);
    }
}
