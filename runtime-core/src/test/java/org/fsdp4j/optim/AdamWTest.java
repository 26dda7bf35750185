// AdamW over segment slices against a scalar fp64 reference, for several steps with a changing
// learning rate and gradient scale, with decay on one segment and not the other.
package org.fsdp4j.optim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class AdamWTest {

    // fp32 parameters of O(1) moved by ≤ 5 updates of O(lr): a few fp32 ulps of 1 (6e-8 each).
    static final double PARAM_ATOL = 1e-6;
    static final double PARAM_RTOL = 1e-6;
    // m and v are fp32 sums of O(1) terms
    static final double STATE_ATOL = 1e-6;
    static final double STATE_RTOL = 1e-5;

    @Test
    void matchesScalarFp64Reference() {
        try (OptimizerTestSupport s = new OptimizerTestSupport();
             OptimizerState state = new OptimizerState(s.backend, s.targets(), AdamW.withDefaults(1e-2f))) {
            AdamW base = new AdamW(1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f);
            int n = OptimizerTestSupport.NUMEL;
            double[] m = new double[n];
            double[] v = new double[n];
            for (int t = 1; t <= 5; t++) {
                float lr = 1e-2f * t / 5;
                float gradScale = 0.5f + 0.25f * t;
                float[] g = s.newGradient();
                base.withLr(lr).step(s.backend, state.segments(), t, gradScale);
                for (int i = 0; i < n; i++) {
                    double gi = (double) gradScale * g[i];
                    m[i] = base.beta1() * m[i] + (1 - (double) base.beta1()) * gi;
                    v[i] = base.beta2() * v[i] + (1 - (double) base.beta2()) * gi * gi;
                    double mHat = m[i] / (1 - Math.pow(base.beta1(), t));
                    double vHat = v[i] / (1 - Math.pow(base.beta2(), t));
                    double wd = OptimizerTestSupport.decayed(i) ? base.weightDecay() : 0;
                    s.refParam[i] -= lr * (mHat / (Math.sqrt(vHat) + base.eps()) + wd * s.refParam[i]);
                }
                s.assertClose("param after step " + t, s.backend.toHost(s.param), s.refParam, PARAM_ATOL, PARAM_RTOL);
            }
            float[] mGot = new float[n];
            float[] vGot = new float[n];
            for (ParamSegment seg : state.segments()) {
                int offset = (int) (seg.param().offset() - s.param.offset());
                s.backend.copyToHost(seg.m(), mGot, offset);
                s.backend.copyToHost(seg.v(), vGot, offset);
            }
            s.assertClose("m", mGot, m, STATE_ATOL, STATE_RTOL);
            s.assertClose("v", vGot, v, STATE_ATOL, STATE_RTOL);
            assertEquals(2L * 4 * n, state.numBytes());
        }
    }

    @Test
    void invalidHyperparametersAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> new AdamW(-1f, 0.9f, 0.95f, 1e-8f, 0.1f));
        assertThrows(IllegalArgumentException.class, () -> new AdamW(1e-3f, 1f, 0.95f, 1e-8f, 0.1f));
        assertThrows(IllegalArgumentException.class, () -> new AdamW(1e-3f, 0.9f, 0.95f, 0f, 0.1f));
        assertThrows(IllegalArgumentException.class, () -> new AdamW(1e-3f, 0.9f, 0.95f, 1e-8f, Float.NaN));
    }

    @Test
    void refusesStateWithoutSecondMoment() {
        try (OptimizerTestSupport s = new OptimizerTestSupport();
             OptimizerState sgdState = new OptimizerState(s.backend, s.targets(), 1)) {
            assertThrows(IllegalArgumentException.class,
                    () -> AdamW.withDefaults(1e-3f).step(s.backend, sgdState.segments(), 1, 1f));
        }
    }
}
