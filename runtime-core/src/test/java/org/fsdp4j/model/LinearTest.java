// Linear (and the bias-free form the tied LM head uses): forward against fp64, backward against
// central differences of the fp64 forward, accumulating into gradients that already hold values.
package org.fsdp4j.model;

import org.fsdp4j.api.Linear;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class LinearTest {

    @ParameterizedTest
    @CsvSource({"true, true", "true, false", "false, true"})
    void backwardMatchesFiniteDifferences(boolean withBias, boolean accumulateDinp) {
        GradCheck gc = new GradCheck();
        int b = 2, t = 3, ic = 5, oc = 7, n = b * t;
        float[] x = gc.uniform(n * ic, 1);
        float[] w = gc.uniform(oc * ic, 0.5);
        float[] bias = gc.uniform(oc, 0.5);
        float[] dout = gc.uniform(n * oc, 1);
        // gradients already holding values: backward must add to them (or overwrite dinp when asked)
        float[] priorX = gc.uniform(n * ic, 1);
        float[] priorW = gc.uniform(oc * ic, 1);
        float[] priorB = gc.uniform(oc, 1);
        Linear linear = new Linear(ic, oc);
        try (Backend be = GradCheck.cpuBackend();
             Tensor xT = GradCheck.upload(be, x, b, t, ic);
             Tensor wT = GradCheck.upload(be, w, oc, ic);
             Tensor biasT = GradCheck.upload(be, bias, oc);
             Tensor out = GradCheck.zeros(be, b, t, oc);
             Tensor doutT = GradCheck.upload(be, dout, b, t, oc);
             Tensor dx = GradCheck.upload(be, priorX, b, t, ic);
             Tensor dw = GradCheck.upload(be, priorW, oc, ic);
             Tensor db = GradCheck.upload(be, priorB, oc)) {
            linear.forward(be, xT, wT, withBias ? biasT : null, out);
            linear.backward(be, doutT, xT, wT, dx, accumulateDinp, dw, withBias ? db : null);

            double[] xd = GradCheck.widen(x), wd = GradCheck.widen(w), bd = withBias ? GradCheck.widen(bias) : null;
            double[] r = GradCheck.widen(dout);
            gc.assertForward("Linear forward", be.toHost(out), RefOps.linear(xd, n, ic, wd, bd, oc));
            gc.assertGradient("Linear dinp", accumulateDinp ? minus(be.toHost(dx), priorX) : be.toHost(dx),
                    GradCheck.finiteDifference(xd, v -> RefOps.dot(r, RefOps.linear(v, n, ic, wd, bd, oc))));
            gc.assertGradient("Linear dweight", minus(be.toHost(dw), priorW),
                    GradCheck.finiteDifference(wd, v -> RefOps.dot(r, RefOps.linear(xd, n, ic, v, bd, oc))));
            if (withBias) {
                gc.assertGradient("Linear dbias", minus(be.toHost(db), priorB),
                        GradCheck.finiteDifference(bd, v -> RefOps.dot(r, RefOps.linear(xd, n, ic, wd, v, oc))));
            }
        }
    }

    private static float[] minus(float[] a, float[] b) {
        float[] out = new float[a.length];
        for (int i = 0; i < a.length; i++) {
            out[i] = a[i] - b[i];
        }
        return out;
    }
}
