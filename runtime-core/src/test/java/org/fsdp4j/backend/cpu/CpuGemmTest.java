// GEMM of the CPU backend against an fp64 triple loop: every transpose combination, padded
// leading dims, strided batches, views at element offsets (the JavaCPP pointer-offset
// pitfall), half operands, beta = 0 over a NaN-poisoned C, and the argument checks.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.junit.jupiter.api.Test;

class CpuGemmTest {

    /** C_ref for the strided-batched contract of Backend.gemm, in fp64. */
    static double[] reference(boolean ta, boolean tb, int m, int n, int k, double alpha, double[] a, int lda,
                              long sa, double[] b, int ldb, long sb, double beta, double[] c, int ldc, long sc,
                              int batch) {
        double[] out = c.clone();
        for (int p = 0; p < batch; p++) {
            for (int i = 0; i < m; i++) {
                for (int j = 0; j < n; j++) {
                    double acc = 0;
                    for (int l = 0; l < k; l++) {
                        double av = ta ? a[(int) (p * sa + (long) l * lda + i)] : a[(int) (p * sa + (long) i * lda + l)];
                        double bv = tb ? b[(int) (p * sb + (long) j * ldb + l)] : b[(int) (p * sb + (long) l * ldb + j)];
                        acc += av * bv;
                    }
                    int ci = (int) (p * sc + (long) i * ldc + j);
                    out[ci] = alpha * acc + (beta == 0 ? 0 : beta * c[ci]);
                }
            }
        }
        return out;
    }

    private void check(CpuTestSupport s, DType dtype, boolean ta, boolean tb, int m, int n, int k, int pad,
                       int batch, float beta, long viewOffset) {
        int lda = (ta ? m : k) + pad;
        int ldb = (tb ? k : n) + pad;
        int ldc = n + pad;
        long sa = (long) (ta ? k : m) * lda + 3;
        long sb = (long) (tb ? n : k) * ldb + 1;
        long sc = (long) m * ldc + 2;
        float alpha = 0.75f;
        double[][] a = new double[1][];
        double[][] b = new double[1][];
        double[][] c = new double[1][];
        try (Tensor ta0 = s.random(dtype, 1, a, viewOffset + sa * batch);
             Tensor tb0 = s.random(dtype, 1, b, viewOffset + sb * batch);
             Tensor tc0 = s.random(dtype, 1, c, viewOffset + sc * batch)) {
            if (beta == 0) {
                s.backend.fill(tc0, Float.NaN);   // beta = 0 must not read C
                java.util.Arrays.fill(c[0], Double.NaN);
            }
            Tensor av = ta0.view(viewOffset, sa * batch);
            Tensor bv = tb0.view(viewOffset, sb * batch);
            Tensor cv = tc0.view(viewOffset, sc * batch);
            s.backend.gemm(ta, tb, m, n, k, alpha, av, lda, sa, bv, ldb, sb, beta, cv, ldc, sc, batch);
            double[] ref = reference(ta, tb, m, n, k, alpha, slice(a[0], viewOffset), lda, sa,
                    slice(b[0], viewOffset), ldb, sb, beta, slice(c[0], viewOffset), ldc, sc, batch);
            double[] got = s.read(cv);
            // untouched gaps keep their value (NaN when beta = 0): compare only written elements, then gaps
            for (int p = 0; p < batch; p++) {
                for (int i = 0; i < m; i++) {
                    for (int j = 0; j < n; j++) {
                        int at = (int) (p * sc + (long) i * ldc + j);
                        double tol = 1e-5 * k + CpuTestSupport.rtol(dtype) * Math.abs(ref[at]);
                        assertTrue(Math.abs(got[at] - ref[at]) <= tol, () -> dtype + " ta=" + ta + " tb=" + tb + " "
                                + m + "x" + n + "x" + k + " batch " + batch + ": C[" + at + "] = " + got[at] + ", ref "
                                + ref[at] + " (seed " + s.seed + ")");
                        got[at] = ref[at] = 0;
                    }
                }
            }
            for (int i = 0; i < got.length; i++) {
                assertEquals(ref[i], got[i], "gap element " + i + " was modified (seed " + s.seed + ")");
            }
        }
    }

    private static double[] slice(double[] x, long from) {
        return java.util.Arrays.copyOfRange(x, (int) from, x.length);
    }

    @Test
    void everyTransposeWithPaddingBatchesAndOffsets() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (boolean ta : new boolean[] {false, true}) {
                for (boolean tb : new boolean[] {false, true}) {
                    check(s, DType.F32, ta, tb, 7, 5, 9, 0, 1, 0.5f, 0);
                    check(s, DType.F32, ta, tb, 13, 11, 6, 3, 3, 1f, 5);
                    check(s, DType.F32, ta, tb, 33, 17, 65, 1, 2, 0f, 1);
                }
            }
            assertEquals(0, s.tracker.liveBytes(MemoryCategory.WORKSPACE));
        }
    }

    @Test
    void tiledGemmsCoverEveryRowAndColumnBand() {
        // shapes just big enough to be cut in two, with a partial last band
        assertArrayEquals(new int[] {2, 1}, GemmOp.tiling(300, 290, 400, 8));
        assertArrayEquals(new int[] {1, 2}, GemmOp.tiling(200, 300, 600, 8));
        assertArrayEquals(new int[] {1, 1}, GemmOp.tiling(300, 290, 400, 1));
        try (CpuTestSupport s = new CpuTestSupport(3)) {
            for (boolean t : new boolean[] {false, true}) {   // each band direction with every transpose once
                check(s, DType.F32, t, !t, 300, 290, 400, 1, 1, 0.5f, 1);
                check(s, DType.F32, t, t, 200, 300, 600, 0, 1, 0f, 0);
            }
        }
    }

    @Test
    void halfOperandsComputeInFp32AndRoundOnce() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType dtype : new DType[] {DType.F16, DType.BF16}) {
                check(s, dtype, false, true, 9, 12, 20, 2, 2, 0.5f, 3);
                check(s, dtype, true, false, 16, 8, 31, 0, 1, 0f, 0);
                check(s, dtype, true, true, 300, 290, 400, 1, 1, 0.5f, 1);    // tiled: panels packed per tile
                check(s, dtype, false, false, 200, 300, 600, 0, 1, 0f, 0);
            }
            assertEquals(0, s.tracker.peakBytes(MemoryCategory.WORKSPACE),
                    "half operands are widened tile by tile while packing, never copied whole");
            assertEquals(0, s.backend.promotedCopies(), "one dtype throughout: nothing to promote");
        }
    }

    /** gemmThenAddBias has the bits of gemm then addBias: on PanelGemm (bias added as C is written) and off it. */
    @Test
    void aBiasAddedAsCIsWrittenHasTheBitsOfAddBias() {
        for (int threads : new int[] {1, 2}) {
            try (CpuTestSupport s = new CpuTestSupport(threads)) {
                int[][] shapes = {{200, 150, 64}, {300, 290, 400}, {200, 300, 600}, {5, 7, 3}};   // PanelGemm (one tile, row and column tiles), OpenBLAS
                for (int[] sh : shapes) {
                    int m = sh[0];
                    int n = sh[1];
                    int k = sh[2];
                    double[][] v = new double[1][];
                    try (Tensor a = s.random(DType.F32, 1, v, m, k);
                         Tensor w = s.random(DType.F32, 1, v, n, k);
                         Tensor bias = s.random(DType.F32, 1, v, n);
                         Tensor fused = s.poisoned(DType.F32, m, n);
                         Tensor apart = s.poisoned(DType.F32, m, n)) {
                        s.backend.gemmThenAddBias(false, true, m, n, k, a, w, fused, bias);
                        s.backend.gemm(false, true, m, n, k, 1f, a, w, 0f, apart);
                        s.backend.addBias(apart, bias);
                        float[] f = s.backend.toHost(fused);
                        float[] p = s.backend.toHost(apart);
                        assertArrayEquals(p, f, threads + " thread(s), " + m + "x" + n + "x" + k);
                    }
                }
            }
        }
    }

    /**
     * gemmThenAddBiasGelu and gemmThenGeluBackward have the bits of the unfused ops (gemm, addBias,
     * geluForward; gemm, a zeroed dpre, geluBackward): on PanelGemm (the GELU or its gradient applied
     * as C is written) and off it, with pre and out at offsets inside larger buffers.
     */
    @Test
    void aGeluAppliedAsCIsWrittenHasTheBitsOfTheUnfusedOps() {
        for (int threads : new int[] {1, 2}) {
            try (CpuTestSupport s = new CpuTestSupport(threads)) {
                int[][] shapes = {{200, 150, 64}, {300, 290, 400}, {200, 300, 600}, {5, 7, 3}};   // as above
                for (int[] sh : shapes) {
                    int m = sh[0];
                    int n = sh[1];
                    int k = sh[2];
                    String what = threads + " thread(s), " + m + "x" + n + "x" + k;
                    double[][] v = new double[1][];
                    try (Tensor a = s.random(DType.F32, 1, v, m, k);
                         Tensor w = s.random(DType.F32, 1, v, n, k);
                         Tensor wt = s.random(DType.F32, 1, v, k, n);
                         Tensor bias = s.random(DType.F32, 1, v, n);
                         Tensor fusedAll = s.poisoned(DType.F32, 3 * m * n + 5);
                         Tensor pre = s.poisoned(DType.F32, m, n);
                         Tensor out = s.poisoned(DType.F32, m, n);
                         Tensor product = s.poisoned(DType.F32, m, n);
                         Tensor dpre = s.backend.zeros(DType.F32, MemoryCategory.ACTIVATIONS, m, n)) {
                        Tensor fusedPre = fusedAll.view(3, m, n);
                        Tensor fusedOut = fusedAll.view(3 + m * n + 1, m, n);
                        Tensor fusedDpre = fusedAll.view(3 + 2 * m * n + 2, m, n);
                        s.backend.gemmThenAddBiasGelu(false, true, m, n, k, a, w, fusedPre, bias, fusedOut);
                        s.backend.gemm(false, true, m, n, k, 1f, a, w, 0f, pre);
                        s.backend.addBias(pre, bias);
                        s.backend.geluForward(pre, out);
                        assertArrayEquals(s.backend.toHost(pre), s.backend.toHost(fusedPre), what + ": pre");
                        assertArrayEquals(s.backend.toHost(out), s.backend.toHost(fusedOut), what + ": GELU(pre)");

                        s.backend.gemmThenGeluBackward(false, false, m, n, k, a, wt, pre, fusedDpre);
                        s.backend.gemm(false, false, m, n, k, 1f, a, wt, 0f, product);
                        s.backend.geluBackward(pre, product, dpre);
                        assertArrayEquals(s.backend.toHost(dpre), s.backend.toHost(fusedDpre), what + ": dpre");
                    }
                }
            }
        }
    }

    @Test
    void emptyKScalesCByBeta() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            check(s, DType.F32, false, false, 4, 3, 0, 0, 1, 0.5f, 0);
        }
    }

    @Test
    void badArgumentsNameTheProblem() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            double[][] x = new double[1][];
            try (Tensor a = s.random(DType.F32, 1, x, 4, 4); Tensor b = s.random(DType.F32, 1, x, 4, 4);
                 Tensor c = s.random(DType.F32, 1, x, 4, 4)) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> s.backend.gemm(false, false, 4, 4, 5, 1f, a, b, 0f, c));
                assertTrue(e.getMessage().contains("gemm") && e.getMessage().contains("needs"), e.getMessage());
                e = assertThrows(IllegalArgumentException.class,
                        () -> s.backend.gemm(false, false, 4, 4, 4, 1f, a, 3, 0, b, 4, 0, 0f, c, 4, 0, 1));
                assertTrue(e.getMessage().contains("lda=3"), e.getMessage());
                e = assertThrows(IllegalArgumentException.class,
                        () -> s.backend.gemm(false, false, 2, 2, 2, 1f, a, 4, 0, b, 4, 0, 0f, a.view(2, 8), 4, 0, 1));
                assertTrue(e.getMessage().contains("overlaps"), e.getMessage());
            }
        }
    }
}
