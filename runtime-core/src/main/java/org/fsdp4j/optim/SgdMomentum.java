// SGD with (heavy-ball) momentum and L2 weight decay on decayed segments. Sharper than AdamW for
// checking that sharded and unsharded training agree, since it does not normalise tiny gradients.
package org.fsdp4j.optim;

import java.util.List;
import org.fsdp4j.backend.Backend;

public record SgdMomentum(float lr, float momentum, float weightDecay) implements Optimizer {

    public SgdMomentum {
        if (!(lr >= 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("SGD learning rate must be finite and >= 0, got " + lr);
        }
        if (!(momentum >= 0 && momentum < 1)) {
            throw new IllegalArgumentException("SGD momentum must be in [0, 1), got " + momentum);
        }
        if (!(weightDecay >= 0) || !Float.isFinite(weightDecay)) {
            throw new IllegalArgumentException("SGD weight decay must be finite and >= 0, got " + weightDecay);
        }
    }

    @Override
    public SgdMomentum withLr(float newLr) {
        return new SgdMomentum(newLr, momentum, weightDecay);
    }

    @Override
    public java.util.List<String> stateNames() {
        return java.util.List.of("momentum_buffer");
    }

    @Override
    public int stateBuffersPerParam() {
        return 1;
    }

    /** {@code step} is unused (SGD has no bias correction) but kept for the common interface. */
    @Override
    public void step(Backend backend, List<ParamSegment> segments, int step, float gradScale) {
        for (ParamSegment s : segments) {
            backend.sgdMomentum(s.param(), s.grad(), s.m(), lr, momentum, s.weightDecay() ? weightDecay : 0f,
                    gradScale);
        }
    }
}
