// Pointwise ops of the CPU backend against fp64 references, for every float dtype: fill,
// casting copies and host copies, add/scale (with aliasing), bias forward/backward and GELU
// forward/backward (which must accumulate into a pre-filled gradient).
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.junit.jupiter.api.Test;

class CpuElementwiseTest {

    static final DType[] FLOATS = {DType.F32, DType.F16, DType.BF16};

    /** Spans several chunks of ElementwiseOps.GRAIN and ends with a partial one. */
    static final int N = 3 * (1 << 14) + 77;

    @Test
    void fillRoundsToTheDtype() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                try (Tensor t = s.backend.allocate(d, MemoryCategory.ACTIVATIONS, N)) {
                    s.backend.fill(t, 1.1f);
                    for (double x : s.read(t)) {
                        assertEquals(d.round(1.1f), x, 0.0, d.toString());
                    }
                }
            }
            try (Tensor t = s.backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, 5)) {
                s.backend.fill(t, -2.7f);
                int[] out = new int[5];
                s.backend.copyToHost(t, out, 0);
                assertArrayEquals(new int[] {-2, -2, -2, -2, -2}, out);
            }
        }
    }

    @Test
    void copyCastsWithOneRounding() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType from : FLOATS) {
                for (DType to : FLOATS) {
                    double[][] v = new double[1][];
                    try (Tensor src = s.random(from, 3, v, N); Tensor dst = s.poisoned(to, N + 10)) {
                        Tensor dstView = dst.view(3, N);
                        s.backend.copy(src, dstView);
                        double[] ref = new double[N];
                        for (int i = 0; i < N; i++) {
                            ref[i] = to.round((float) v[0][i]);
                        }
                        s.assertClose("copy " + from + "→" + to, ref, dstView, 0, 0);
                        assertTrue(Double.isNaN(s.read(dst)[2]) && Double.isNaN(s.read(dst)[N + 3]),
                                "copy wrote outside the view");
                    }
                }
            }
        }
    }

    @Test
    void sameDtypeCopyIsAnOverlapSafeMove() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            double[][] v = new double[1][];
            try (Tensor t = s.random(DType.F32, 1, v, 100)) {
                s.backend.copy(t.view(0, 90), t.view(5, 90));
                double[] got = s.read(t);
                for (int i = 0; i < 90; i++) {
                    assertEquals(v[0][i], got[i + 5], 0.0, "element " + i + " (seed " + s.seed + ")");
                }
            }
            try (Tensor a = s.ints(new int[] {4, -1, 7}, 3); Tensor b = s.backend.allocate(DType.I32,
                    MemoryCategory.ACTIVATIONS, 3); Tensor f = s.poisoned(DType.F32, 3)) {
                s.backend.copy(a, b);
                int[] out = new int[3];
                s.backend.copyToHost(b, out, 0);
                assertArrayEquals(new int[] {4, -1, 7}, out);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> s.backend.copy(a, f));
                assertTrue(e.getMessage().contains("copy"), e.getMessage());
            }
        }
    }

    @Test
    void hostCopiesHonourOffsetsAndBounds() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            float[] host = new float[N + 10];
            for (int i = 0; i < host.length; i++) {
                host[i] = (float) s.random.nextGaussian();
            }
            try (Tensor t = s.poisoned(DType.F32, N)) {
                s.backend.copyFromHost(host, 10, t);
                float[] back = new float[N + 4];
                s.backend.copyToHost(t, back, 4);
                for (int i = 0; i < N; i++) {
                    assertEquals(host[10 + i], back[4 + i], 0f);
                }
                assertThrows(IllegalArgumentException.class, () -> s.backend.copyFromHost(host, 11, t));
                assertThrows(IllegalArgumentException.class, () -> s.backend.copyToHost(t, new float[N], 1));
            }
        }
    }

    @Test
    void addAndScaleInEveryDtypeIncludingAliases() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                double[][] a = new double[1][];
                double[][] b = new double[1][];
                try (Tensor ta = s.random(d, 2, a, N); Tensor tb = s.random(DType.F32, 2, b, N);
                     Tensor out = s.poisoned(d, N)) {
                    s.backend.add(ta, tb, out);
                    double[] ref = new double[N];
                    for (int i = 0; i < N; i++) {
                        ref[i] = a[0][i] + b[0][i];
                    }
                    s.assertClose("add " + d, ref, out, 1e-6, CpuTestSupport.rtol(d));
                    s.backend.accumulate(ta, tb);   // out aliases a
                    s.assertClose("accumulate " + d, ref, ta, 1e-6, CpuTestSupport.rtol(d));
                    s.backend.scale(tb, -0.3f);
                    for (int i = 0; i < N; i++) {
                        ref[i] = -0.3 * b[0][i];
                    }
                    s.assertClose("scale", ref, tb, 1e-7, 1e-6);
                }
            }
        }
    }

    /** addScaled gives the bits of add then scale, in every dtype, and with out aliasing an input. */
    @Test
    void addScaledIsAddThenScaleBitForBit() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                double[][] a = new double[1][];
                double[][] b = new double[1][];
                try (Tensor ta = s.random(d, 2, a, N); Tensor tb = s.random(DType.F32, 2, b, N);
                     Tensor fused = s.poisoned(d, N); Tensor twoOps = s.poisoned(d, N)) {
                    s.backend.addScaled(ta, tb, 1f / 3, fused);
                    s.backend.add(ta, tb, twoOps);
                    s.backend.scale(twoOps, 1f / 3);
                    assertArrayEquals(s.backend.toHost(twoOps), s.backend.toHost(fused), 0f, "addScaled " + d);
                    s.backend.addScaled(ta, tb, 1f / 3, ta);   // out aliases a
                    assertArrayEquals(s.backend.toHost(twoOps), s.backend.toHost(ta), 0f, "addScaled into a, " + d);
                }
            }
        }
    }

    @Test
    void biasForwardBroadcastsAndBackwardAccumulatesColumnSums() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            int rows = 1200;
            int oc = 50;
            for (DType d : FLOATS) {
                double[][] x = new double[1][];
                double[][] bias = new double[1][];
                double[][] dbias = new double[1][];
                try (Tensor out = s.random(d, 1, x, rows, oc); Tensor tb = s.random(d, 1, bias, oc);
                     Tensor tdb = s.random(d, 1, dbias, oc)) {
                    double[] ref = new double[rows * oc];
                    double[] refDb = dbias[0].clone();
                    for (int r = 0; r < rows; r++) {
                        for (int j = 0; j < oc; j++) {
                            ref[r * oc + j] = x[0][r * oc + j] + bias[0][j];
                            refDb[j] += x[0][r * oc + j];
                        }
                    }
                    s.backend.biasBackward(out, tdb);
                    s.assertClose("biasBackward " + d, refDb, tdb, 1e-4, CpuTestSupport.rtol(d));
                    s.backend.addBias(out, tb);
                    s.assertClose("addBias " + d, ref, out, 1e-6, CpuTestSupport.rtol(d));
                    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                            () -> s.backend.addBias(out, tb.view(0, oc - 1)));
                    assertTrue(e.getMessage().startsWith("addBias"), e.getMessage());
                }
            }
        }
    }

    /** A thread's ColumnSums partials are reused, zeroed: each column sum is its own rows' alone, op after op. */
    @Test
    void columnSumsOfOneOpNeverReachTheNext() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (int round = 0; round < 3; round++) {
                for (int[] shape : new int[][] {{700, 40}, {300, 40}, {700, 24}}) {
                    double[][] x = new double[1][];
                    try (Tensor out = s.random(DType.F32, 1 + round, x, shape[0], shape[1]);
                         Tensor tdb = s.backend.zeros(DType.F32, MemoryCategory.GRADS, shape[1])) {
                        double[] refDb = new double[shape[1]];
                        for (int r = 0; r < shape[0]; r++) {
                            for (int j = 0; j < shape[1]; j++) {
                                refDb[j] += x[0][r * shape[1] + j];
                            }
                        }
                        s.backend.biasBackward(out, tdb);
                        s.assertClose("biasBackward " + shape[0] + " x " + shape[1] + ", round " + round, refDb, tdb,
                                1e-4, CpuTestSupport.rtol(DType.F32));
                    }
                }
            }
        }
    }

    static double geluRef(double x) {
        return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
    }

    @Test
    void geluForwardAndBackwardMatchTheTanhFormula() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                double[][] x = new double[1][];
                double[][] g = new double[1][];
                double[][] dx = new double[1][];
                try (Tensor tx = s.random(d, 5, x, N); Tensor tg = s.random(d, 1, g, N);
                     Tensor tdx = s.random(d, 1, dx, N); Tensor out = s.poisoned(d, N)) {
                    s.backend.geluForward(tx, out);
                    double[] ref = new double[N];
                    double[] refDx = new double[N];
                    double h = 1e-6;
                    for (int i = 0; i < N; i++) {
                        double v = x[0][i];
                        ref[i] = geluRef(v);
                        refDx[i] = dx[0][i] + (geluRef(v + h) - geluRef(v - h)) / (2 * h) * g[0][i];
                    }
                    s.assertClose("geluForward " + d, ref, out, 1e-6, CpuTestSupport.rtol(d));
                    s.backend.geluBackward(tx, tg, tdx);
                    s.assertClose("geluBackward " + d, refDx, tdx, 1e-5, CpuTestSupport.rtol(d));
                }
            }
        }
    }
}
