// Clipping by global norm, folded into the optimizer's gradient scale rather than a pass over
// the gradients: one factor, applied by whatever updates the parameters (one rank or a shard).
package org.fsdp4j.optim;

public final class GradientClipping {

    private GradientClipping() {
    }

    /**
     * The factor that brings a gradient of global norm {@code norm} down to {@code maxNorm}
     * (1 when it is already within, or when maxNorm is 0, meaning no clipping). The 1e-6 keeps
     * the factor finite for a zero gradient, as torch.nn.utils.clip_grad_norm_ does.
     */
    public static float scale(double norm, float maxNorm) {
        if (maxNorm <= 0 || norm <= maxNorm) {
            return 1f;
        }
        return (float) (maxNorm / (norm + 1e-6));
    }
}
