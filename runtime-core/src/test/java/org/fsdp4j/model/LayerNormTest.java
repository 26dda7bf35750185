// LayerNorm: forward against fp64, backward (input, gain, bias) against central differences.
package org.fsdp4j.model;

import org.fsdp4j.api.LayerNorm;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class LayerNormTest {

    @Test
    void backwardMatchesFiniteDifferences() {
        GradCheck gc = new GradCheck();
        int b = 2, t = 3, c = 8, n = b * t;
        float[] x = gc.uniform(n * c, 1);
        float[] w = gc.around(c, 1, 0.5);
        float[] bias = gc.uniform(c, 0.5);
        float[] dout = gc.uniform(n * c, 1);
        LayerNorm norm = new LayerNorm(c);
        try (Backend be = GradCheck.cpuBackend();
             Tensor xT = GradCheck.upload(be, x, b, t, c);
             Tensor wT = GradCheck.upload(be, w, c);
             Tensor biasT = GradCheck.upload(be, bias, c);
             Tensor out = GradCheck.zeros(be, b, t, c);
             Tensor doutT = GradCheck.upload(be, dout, b, t, c);
             Tensor dx = GradCheck.zeros(be, b, t, c);
             Tensor dw = GradCheck.zeros(be, c);
             Tensor db = GradCheck.zeros(be, c)) {
            try (LayerNorm.Saved saved = norm.forward(be, xT, wT, biasT, out)) {
                norm.backward(be, saved, doutT, xT, wT, dx, dw, db);
            }
            double[] xd = GradCheck.widen(x), wd = GradCheck.widen(w), bd = GradCheck.widen(bias);
            double[] r = GradCheck.widen(dout);
            gc.assertForward("LayerNorm forward", be.toHost(out), RefOps.layerNorm(xd, n, c, wd, bd));
            gc.assertGradient("LayerNorm dinp", be.toHost(dx),
                    GradCheck.finiteDifference(xd, v -> RefOps.dot(r, RefOps.layerNorm(v, n, c, wd, bd))));
            gc.assertGradient("LayerNorm dweight", be.toHost(dw),
                    GradCheck.finiteDifference(wd, v -> RefOps.dot(r, RefOps.layerNorm(xd, n, c, v, bd))));
            gc.assertGradient("LayerNorm dbias", be.toHost(db),
                    GradCheck.finiteDifference(bd, v -> RefOps.dot(r, RefOps.layerNorm(xd, n, c, wd, v))));
        }
    }
}
