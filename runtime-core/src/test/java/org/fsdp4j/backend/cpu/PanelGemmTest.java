// PanelGemm, the CPU backend's fp32 GEMM for Linear-sized products, against a plain fp64
// reference: all four transposes, α and β as the layers call them and otherwise, sizes off the
// 6-row tile and the 64-column panel, k past one packed block, n past one column block, operands
// at offsets inside wider rows (C's gaps untouched); β = 0 never reads C; and an element's bits do
// not depend on the extent of the call it is computed in (what lets GemmOp cut C per thread).
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.FloatBuffer;
import java.util.Arrays;
import java.util.Random;
import org.fsdp4j.api.MemoryTracker;
import org.junit.jupiter.api.Test;

class PanelGemmTest {

    private static final float[][] ALPHA_BETA = {{1, 0}, {1, 1}, {0.5f, 0}, {1, 0.25f}, {2, 1}};

    @Test
    void productsMatchAnFp64ReferenceForEveryTransposeAlphaAndBeta() {
        Random r = new Random(11);
        for (boolean transA : new boolean[] {false, true}) {
            for (boolean transB : new boolean[] {false, true}) {
                for (float[] ab : ALPHA_BETA) {
                    check(r, 13, 70, 5, transA, transB, ab[0], ab[1]);
                }
                // two row blocks (MC), two packed depths (KC), three column panels, the last partial
                check(r, PanelGemm.MC + 7, 2 * TileGemm.NR + 3, PanelGemm.KC + 88, transA, transB, 1, 0);
                check(r, PanelGemm.MC + 7, 2 * TileGemm.NR + 3, PanelGemm.KC + 88, transA, transB, 1, 1);
            }
        }
    }

    @Test
    void columnBlocksPastThePackedBudget() {
        int k = 2100;
        int n = 1000;                                          // B_FLOATS / k columns at a time: two blocks
        assertTrue((long) k * n > PanelGemm.B_FLOATS, "the case must need two column blocks");
        check(new Random(12), 7, n, k, false, true, 1, 0);
        check(new Random(13), 7, n, k, true, false, 1, 1);
    }

    @Test
    void aZeroBetaNeverReadsC() {
        Random r = new Random(14);
        int m = 20;
        int n = 40;
        int k = 30;
        float[] a = random(r, m * k);
        float[] b = random(r, k * n);
        float[] c = new float[m * n];
        Arrays.fill(c, Float.NaN);
        PanelGemm.sgemm(false, false, m, n, k, 1, FloatBuffer.wrap(a), 0, k, FloatBuffer.wrap(b), 0, n,
                0, FloatBuffer.wrap(c), 0, n, false);
        for (float x : c) {
            assertFalse(Float.isNaN(x), "β = 0 read C's NaN");
        }
    }

    @Test
    void theJavaKernelIsTheDefaultWhereTheTileHas32RegistersAndOpenBlasIsNotWider() {
        assertTrue(CpuKernelChoice.javaGemm("", false, false));           // Zen 4, AArch64
        assertFalse(CpuKernelChoice.javaGemm("", true, false));           // x86 below AVX-512: OpenBLAS
        assertFalse(CpuKernelChoice.javaGemm("", false, true));           // two 512-bit FMA pipes: OpenBLAS
        assertTrue(CpuKernelChoice.javaGemm("java", true, true));
        assertTrue(CpuKernelChoice.javaGemm("JAVA", true, false));
        assertFalse(CpuKernelChoice.javaGemm("openblas", false, false));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CpuKernelChoice.javaGemm("mkl", false, false));
        assertTrue(e.getMessage().contains("must be java or openblas"), e.getMessage());
        assertEquals(PanelGemm.ENABLED, PanelGemm.suits(256, 256, 256));    // a Linear-sized product
    }

    @Test
    void openBlasIsWiderOnlyWithAvx512KernelsOnTwoFmaPipes() {
        assertTrue(CpuKernelChoice.wideBlas("amd64", 16, null, "GenuineIntel", "6"));          // Intel server core
        assertTrue(CpuKernelChoice.wideBlas("amd64", 16, "SkylakeX", "GenuineIntel", "6"));
        assertTrue(CpuKernelChoice.wideBlas("amd64", 16, "cooperlake", "GenuineIntel", "6"));
        assertTrue(CpuKernelChoice.wideBlas("amd64", 16, null, "AuthenticAMD", "26"));         // Zen 5
        assertFalse(CpuKernelChoice.wideBlas("amd64", 16, null, "AuthenticAMD", "25"));        // Zen 4: halves
        assertFalse(CpuKernelChoice.wideBlas("amd64", 16, "Haswell", "GenuineIntel", "6"));    // told AVX2 kernels
        assertFalse(CpuKernelChoice.wideBlas("amd64", 8, null, "GenuineIntel", "6"));          // no AVX-512
        assertFalse(CpuKernelChoice.wideBlas("aarch64", 16, null, "", ""));
    }

    @Test
    void theBackendsNameSaysWhichKernelRunsTheLinearProducts() {
        assertEquals("PanelGemm 6x4 + OpenBLAS", CpuKernelChoice.gemmWords(true, false, null));
        assertEquals("PanelGemm 4x3 + OpenBLAS Haswell", CpuKernelChoice.gemmWords(true, true, "Haswell"));
        assertEquals("OpenBLAS", CpuKernelChoice.gemmWords(false, true, ""));
        assertEquals("OpenBLAS Zen", CpuKernelChoice.gemmWords(false, true, "Zen"));
        try (CpuBackend b = new CpuBackend(new MemoryTracker("name"), 1)) {
            assertTrue(b.name().startsWith("cpu (" + CpuKernelChoice.gemmWords() + ", 1 thread"), b.name());
            assertEquals(PanelGemm.ENABLED, b.name().contains("PanelGemm"), b.name());
        }
    }

    @Test
    void aBadKernelChoiceStopsTheBackendWhenItIsMade() {
        // Checked in CpuBackend's constructor, before any GEMM initialises TileGemm or PanelGemm:
        // the command line then prints the message as one line (bad input), not a class-init trace.
        for (String[] bad : new String[][] {{CpuKernelChoice.GEMM_PROPERTY, "mkl", "must be java or openblas, got 'mkl'"},
                {CpuKernelChoice.TILE_PROPERTY, "6x2", "must be 6x4 or 4x3, got '6x2'"}}) {
            String before = System.getProperty(bad[0]);
            System.setProperty(bad[0], bad[1]);
            try {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> new CpuBackend(new MemoryTracker("choice"), 1).close());
                assertTrue(e.getMessage().contains(bad[2]), e.getMessage());
            } finally {
                if (before == null) {
                    System.clearProperty(bad[0]);
                } else {
                    System.setProperty(bad[0], before);
                }
            }
        }
    }

    @Test
    void anEmptySumScalesC() {
        float[] c = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
        FloatBuffer none = FloatBuffer.wrap(new float[0]);
        PanelGemm.sgemm(false, false, 6, 2, 0, 1, none, 0, 1, none, 0, 2, 0.5f, FloatBuffer.wrap(c), 0, 2, false);
        assertArrayEquals(new float[] {0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4.5f, 5, 5.5f, 6}, c);
    }

    @Test
    void anElementsBitsDoNotDependOnTheCallsExtent() {
        Random r = new Random(15);
        int m = 150;
        int n = 200;
        int k = 700;
        for (boolean transA : new boolean[] {false, true}) {
            for (boolean transB : new boolean[] {false, true}) {
                float[] a = random(r, m * k);
                float[] b = random(r, k * n);
                int lda = transA ? m : k;
                int ldb = transB ? k : n;
                float[] whole = new float[m * n];
                PanelGemm.sgemm(transA, transB, m, n, k, 1, FloatBuffer.wrap(a), 0, lda, FloatBuffer.wrap(b), 0, ldb,
                        0, FloatBuffer.wrap(whole), 0, n, false);
                float[] pieces = new float[m * n];
                int[][] cuts = {{0, 37, 0, 100}, {37, m, 0, 100}, {0, 37, 100, n}, {37, m, 100, n}};
                for (int[] cut : cuts) {
                    int i0 = cut[0];
                    int j0 = cut[2];
                    PanelGemm.sgemm(transA, transB, cut[1] - i0, cut[3] - j0, k, 1,
                            FloatBuffer.wrap(a), transA ? i0 : (long) i0 * lda, lda,
                            FloatBuffer.wrap(b), transB ? (long) j0 * ldb : j0, ldb,
                            0, FloatBuffer.wrap(pieces), (long) i0 * n + j0, n, true);
                }
                assertArrayEquals(whole, pieces, (transA ? "Aᵀ" : "A") + (transB ? "·Bᵀ" : "·B"));
            }
        }
    }

    /** C = α·op(A)·op(B) + β·C at offsets inside wider rows, against fp64; C's gaps stay as they were. */
    private static void check(Random r, int m, int n, int k, boolean transA, boolean transB, float alpha, float beta) {
        int lda = (transA ? m : k) + 3;
        int ldb = (transB ? k : n) + 5;
        int ldc = n + 9;
        int aOff = 4;
        int bOff = 2;
        int cOff = 7;
        float[] a = random(r, aOff + (transA ? k : m) * lda);
        float[] b = random(r, bOff + (transB ? n : k) * ldb);
        float[] c = random(r, cOff + m * ldc);
        float[] before = c.clone();
        PanelGemm.sgemm(transA, transB, m, n, k, alpha, FloatBuffer.wrap(a), aOff, lda, FloatBuffer.wrap(b), bOff, ldb,
                beta, FloatBuffer.wrap(c), cOff, ldc, true);
        String where = (transA ? "Aᵀ" : "A") + (transB ? "·Bᵀ" : "·B") + " m " + m + " n " + n + " k " + k
                + " α " + alpha + " β " + beta;
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < ldc; j++) {
                int at = cOff + i * ldc + j;
                if (j >= n) {
                    assertEquals(before[at], c[at], "outside the product, " + where);
                    continue;
                }
                double sum = 0;
                double scale = 0;
                for (int p = 0; p < k; p++) {
                    double term = (double) a[aOff + (transA ? p * lda + i : i * lda + p)]
                            * b[bOff + (transB ? j * ldb + p : p * ldb + j)];
                    sum += term;
                    scale += Math.abs(term);
                }
                double want = alpha * sum + beta * before[at];
                double bound = (k + 3) * 0x1p-24 * (Math.abs(alpha) * scale + Math.abs(beta * before[at]));
                // fp32 fused multiply-adds in order, one rounding for α and one for β·C: a wrong or missing term is far more
                assertTrue(Math.abs(c[at] - want) <= bound, where + ": C[" + i + ", " + j + "] = " + c[at] + ", want "
                        + want);
            }
        }
    }

    private static float[] random(Random r, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) r.nextGaussian();
        }
        return x;
    }
}
