// AdamW (Loshchilov & Hutter): Adam with bias correction and decoupled weight decay, applied
// only to segments marked for decay (2-D weights, as nanoGPT). Defaults are GPT-2/nanoGPT's.
package org.fsdp4j.optim;

import java.util.List;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Backend;

public record AdamW(float lr, float beta1, float beta2, float eps, float weightDecay) implements Optimizer {

    public AdamW {
        if (!(lr >= 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("AdamW learning rate must be finite and >= 0, got " + lr);
        }
        if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) {
            throw new IllegalArgumentException("AdamW betas must be in [0, 1), got beta1=" + beta1 + " beta2=" + beta2);
        }
        if (!(eps > 0)) {
            throw new IllegalArgumentException("AdamW eps must be > 0, got " + eps);
        }
        if (!(weightDecay >= 0) || !Float.isFinite(weightDecay)) {
            throw new IllegalArgumentException("AdamW weight decay must be finite and >= 0, got " + weightDecay);
        }
    }

    /** lr with the defaults beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1. */
    public static AdamW withDefaults(float lr) {
        return new AdamW(lr, 0.9f, 0.95f, 1e-8f, 0.1f);
    }

    @Override
    public AdamW withLr(float newLr) {
        return new AdamW(newLr, beta1, beta2, eps, weightDecay);
    }

    @Override
    public int stateBuffersPerParam() {
        return 2;
    }

    @Override
    public List<String> stateNames() {
        return List.of("exp_avg", "exp_avg_sq");
    }

    @Override
    public void step(Backend backend, List<ParamSegment> segments, int step, float gradScale) {
        AdamWStep decayed = new AdamWStep(lr, beta1, beta2, eps, weightDecay, step, gradScale);
        AdamWStep undecayed = decayed.withWeightDecay(0f);
        for (ParamSegment s : segments) {
            if (s.v() == null) {
                throw new IllegalArgumentException("AdamW needs two state buffers (m and v) per segment; "
                        + "build the OptimizerState with this optimizer");
            }
            backend.adamW(s.param(), s.grad(), s.m(), s.v(), s.weightDecay() ? decayed : undecayed);
        }
    }
}
