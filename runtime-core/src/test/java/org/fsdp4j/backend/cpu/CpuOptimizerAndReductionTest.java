// AdamW and SGD-momentum on flat F32 buffers (grad in every float dtype) and the fp64
// reductions, against fp64 references of the formulas in Backend's javadoc.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;
import org.junit.jupiter.api.Test;

class CpuOptimizerAndReductionTest {

    static final int N = 2 * (1 << 14) + 123;

    @Test
    void adamWMatchesTheBiasCorrectedFormula() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType gd : CpuElementwiseTest.FLOATS) {
                AdamWStep step = new AdamWStep(1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1 + s.random.nextInt(20), 0.5f);
                double[][] p = new double[1][];
                double[][] g = new double[1][];
                double[][] m = new double[1][];
                double[][] v = new double[1][];
                try (Tensor tp = s.random(DType.F32, 1, p, N); Tensor tg = s.random(gd, 2, g, N);
                     Tensor tm = s.random(DType.F32, 0.1, m, N); Tensor tv = s.random(DType.F32, 0.1, v, N)) {
                    for (int i = 0; i < N; i++) {
                        v[0][i] = Math.abs(v[0][i]);
                    }
                    s.backend.copyFromHost(toFloats(v[0]), 0, tv);
                    double[] refP = new double[N];
                    double[] refM = new double[N];
                    double[] refV = new double[N];
                    double bc1 = 1 - Math.pow(step.beta1(), step.step());
                    double bc2 = 1 - Math.pow(step.beta2(), step.step());
                    for (int i = 0; i < N; i++) {
                        double gi = step.gradScale() * g[0][i];
                        refM[i] = step.beta1() * m[0][i] + (1 - (double) step.beta1()) * gi;
                        refV[i] = step.beta2() * v[0][i] + (1 - (double) step.beta2()) * gi * gi;
                        double mhat = refM[i] / bc1;
                        double vhat = refV[i] / bc2;
                        refP[i] = p[0][i] - step.lr() * (mhat / (Math.sqrt(vhat) + step.eps())
                                + step.weightDecay() * p[0][i]);
                    }
                    s.backend.adamW(tp, tg, tm, tv, step);
                    s.assertClose("adamW m (grad " + gd + ")", refM, tm, 1e-7, 1e-5);
                    s.assertClose("adamW v (grad " + gd + ")", refV, tv, 1e-9, 1e-5);
                    // p moves by at most ~lr per step: an absolute bound relative to lr is the meaningful one
                    s.assertClose("adamW param (grad " + gd + ")", refP, tp, 1e-5 * step.lr(), 1e-6);
                    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                            () -> s.backend.adamW(tp, tg, tm, tv.view(0, N - 1), step));
                    assertTrue(e.getMessage().startsWith("adamW"), e.getMessage());
                }
            }
        }
    }

    @Test
    void sgdMomentum() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            float lr = 0.05f;
            float mom = 0.9f;
            float wd = 0.01f;
            float gs = 0.25f;
            double[][] p = new double[1][];
            double[][] g = new double[1][];
            double[][] b = new double[1][];
            try (Tensor tp = s.random(DType.F32, 1, p, N); Tensor tg = s.random(DType.BF16, 1, g, N);
                 Tensor tb = s.random(DType.F32, 1, b, N)) {
                double[] refP = new double[N];
                double[] refB = new double[N];
                for (int i = 0; i < N; i++) {
                    double gi = gs * g[0][i] + wd * p[0][i];
                    refB[i] = mom * b[0][i] + gi;
                    refP[i] = p[0][i] - lr * refB[i];
                }
                s.backend.sgdMomentum(tp, tg, tb, lr, mom, wd, gs);
                s.assertClose("sgd buf", refB, tb, 1e-6, 1e-5);
                s.assertClose("sgd param", refP, tp, 1e-6, 1e-5);
            }
        }
    }

    @Test
    void reductionsInFp64() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : CpuElementwiseTest.FLOATS) {
                double[][] x = new double[1][];
                try (Tensor t = s.random(d, 3, x, N)) {
                    double sq = 0;
                    double sum = 0;
                    for (double v : x[0]) {
                        sq += v * v;
                        sum += v;
                    }
                    assertEquals(sq, s.backend.sumOfSquares(t), 1e-12 * N * 9, "sumOfSquares " + d + " seed " + s.seed);
                    assertEquals(sum, s.backend.sum(t), 1e-12 * N * 3, "sum " + d + " seed " + s.seed);
                    assertFalse(s.backend.hasNonFinite(t));
                    for (float bad : new float[] {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY}) {
                        int at = s.random.nextInt(N);
                        Tensor one = t.view(at, 1);
                        s.backend.fill(one, bad);
                        assertTrue(s.backend.hasNonFinite(t), bad + " at " + at + " in " + d);
                        s.backend.fill(one, 1f);
                    }
                    assertFalse(s.backend.hasNonFinite(t));
                }
            }
        }
    }

    static float[] toFloats(double[] x) {
        float[] f = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            f[i] = (float) x[i];
        }
        return f;
    }
}
