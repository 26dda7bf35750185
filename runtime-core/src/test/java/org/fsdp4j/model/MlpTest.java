// The GELU MLP: forward against fp64, backward (input and all four parameters) against
// central differences of the fp64 forward.
package org.fsdp4j.model;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class MlpTest {

    @Test
    void backwardMatchesFiniteDifferences() {
        GradCheck gc = new GradCheck();
        int b = 2, t = 3, c = 4, n = b * t;
        float[] x = gc.uniform(n * c, 1);
        float[] fcW = gc.uniform(4 * c * c, 1);
        float[] fcB = gc.uniform(4 * c, 0.5);
        float[] projW = gc.uniform(c * 4 * c, 0.5);
        float[] projB = gc.uniform(c, 0.5);
        float[] dout = gc.uniform(n * c, 1);
        Mlp mlp = new Mlp(c);
        try (Backend be = GradCheck.cpuBackend();
             Tensor xT = GradCheck.upload(be, x, b, t, c);
             Tensor fcWT = GradCheck.upload(be, fcW, 4 * c, c);
             Tensor fcBT = GradCheck.upload(be, fcB, 4 * c);
             Tensor projWT = GradCheck.upload(be, projW, c, 4 * c);
             Tensor projBT = GradCheck.upload(be, projB, c);
             Tensor out = GradCheck.zeros(be, b, t, c);
             Tensor doutT = GradCheck.upload(be, dout, b, t, c);
             Tensor dx = GradCheck.zeros(be, b, t, c);
             Tensor dfcW = GradCheck.zeros(be, 4 * c, c);
             Tensor dfcB = GradCheck.zeros(be, 4 * c);
             Tensor dprojW = GradCheck.zeros(be, c, 4 * c);
             Tensor dprojB = GradCheck.zeros(be, c)) {
            try (Mlp.Saved saved = mlp.forward(be, xT, fcWT, fcBT, projWT, projBT, out)) {
                mlp.backward(be, saved, xT, doutT, dx, fcWT, projWT, dfcW, dfcB, dprojW, dprojB);
            }
            double[] xd = GradCheck.widen(x), fw = GradCheck.widen(fcW), fb = GradCheck.widen(fcB);
            double[] pw = GradCheck.widen(projW), pb = GradCheck.widen(projB), r = GradCheck.widen(dout);
            gc.assertForward("mlp forward", be.toHost(out), RefOps.mlp(xd, n, c, fw, fb, pw, pb));
            gc.assertGradient("mlp dinp", be.toHost(dx), GradCheck.finiteDifference(xd,
                    v -> RefOps.dot(r, RefOps.mlp(v, n, c, fw, fb, pw, pb))));
            gc.assertGradient("mlp dfc.weight", be.toHost(dfcW), GradCheck.finiteDifference(fw,
                    v -> RefOps.dot(r, RefOps.mlp(xd, n, c, v, fb, pw, pb))));
            gc.assertGradient("mlp dfc.bias", be.toHost(dfcB), GradCheck.finiteDifference(fb,
                    v -> RefOps.dot(r, RefOps.mlp(xd, n, c, fw, v, pw, pb))));
            gc.assertGradient("mlp dproj.weight", be.toHost(dprojW), GradCheck.finiteDifference(pw,
                    v -> RefOps.dot(r, RefOps.mlp(xd, n, c, fw, fb, v, pb))));
            gc.assertGradient("mlp dproj.bias", be.toHost(dprojB), GradCheck.finiteDifference(pb,
                    v -> RefOps.dot(r, RefOps.mlp(xd, n, c, fw, fb, pw, v))));
        }
    }
}
