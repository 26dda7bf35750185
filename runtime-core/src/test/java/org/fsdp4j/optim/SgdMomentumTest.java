// SGD with momentum over segment slices against a scalar fp64 reference.
package org.fsdp4j.optim;

import org.junit.jupiter.api.Test;

class SgdMomentumTest {

    static final double PARAM_ATOL = 1e-6;
    static final double PARAM_RTOL = 1e-6;

    @Test
    void matchesScalarFp64Reference() {
        SgdMomentum sgd = new SgdMomentum(0.05f, 0.9f, 0.1f);
        try (OptimizerTestSupport s = new OptimizerTestSupport();
             OptimizerState state = new OptimizerState(s.backend, s.targets(), sgd)) {
            int n = OptimizerTestSupport.NUMEL;
            double[] buf = new double[n];
            for (int t = 1; t <= 5; t++) {
                float gradScale = 2f / t;
                float[] g = s.newGradient();
                sgd.step(s.backend, state.segments(), t, gradScale);
                for (int i = 0; i < n; i++) {
                    double wd = OptimizerTestSupport.decayed(i) ? sgd.weightDecay() : 0;
                    double gi = (double) gradScale * g[i] + wd * s.refParam[i];
                    buf[i] = sgd.momentum() * buf[i] + gi;
                    s.refParam[i] -= sgd.lr() * buf[i];
                }
                s.assertClose("param after step " + t, s.backend.toHost(s.param), s.refParam, PARAM_ATOL, PARAM_RTOL);
            }
        }
    }
}
