// TileGemm, the fused attention's register-tiled product, against a plain fp64 reference: A read
// straight and transposed through its strides, C overwritten and accumulated, k from 1 to beyond
// a tile's worth, and C's tiles placed inside a wider row (ldc > n) without touching the rest; the
// two tile shapes (6 × 4 vectors for 32-register ISAs, 4 × 3 for AVX2) give the same bits.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

class TileGemmTest {

    @Test
    void productsMatchAnFp64ReferenceForStraightAndTransposedA() {
        Random r = new Random(3);
        for (int k : new int[] {1, 7, 64, 131}) {
            for (boolean transA : new boolean[] {false, true}) {
                for (boolean accumulate : new boolean[] {false, true}) {
                    check(r, 2 * TileGemm.MR, 2 * TileGemm.NR, k, transA, accumulate);
                }
            }
        }
    }

    @Test
    void theTwoTileShapesGiveTheSameBits() {
        Random r = new Random(5);
        int fl = Simd.FL;
        int m = 12;                                 // 2 tiles of 6 rows, 3 of 4
        int n = 12 * fl;                            // 3 tiles of 4 vectors, 4 of 3
        for (int k : new int[] {1, 9, 200}) {
            for (boolean transA : new boolean[] {false, true}) {
                for (boolean accumulate : new boolean[] {false, true}) {
                    int ldc = n + 3;
                    int lda = transA ? m + 2 : k + 1;
                    int ars = transA ? 1 : lda;
                    int acs = transA ? lda : 1;
                    float[] a = random(r, (transA ? k : m) * lda);
                    float[] b = random(r, k * n);
                    float[] wide = random(r, m * ldc);
                    float[] narrow = wide.clone();
                    for (int i = 0; i < m; i += 6) {
                        for (int j = 0; j < n; j += 4 * fl) {
                            TileGemm.tile6x4(k, a, i * ars, ars, acs, b, j, n, wide, i * ldc + j, ldc, accumulate);
                        }
                    }
                    for (int i = 0; i < m; i += 4) {
                        for (int j = 0; j < n; j += 3 * fl) {
                            TileGemm.tile4x3(k, a, i * ars, ars, acs, b, j, n, narrow, i * ldc + j, ldc, accumulate);
                        }
                    }
                    assertArrayEquals(wide, narrow, "k " + k + (transA ? " Aᵀ" : " A") + (accumulate ? " +=" : " ="));
                }
            }
        }
    }

    @Test
    void theTileIsNarrowOnlyOnX86BelowAvx512() {
        assertTrue(CpuKernelChoice.narrowTile("amd64", 8, ""));        // AVX2: 16 registers
        assertFalse(CpuKernelChoice.narrowTile("amd64", 16, ""));      // AVX-512: 32
        assertFalse(CpuKernelChoice.narrowTile("aarch64", 4, ""));     // NEON: 32
        assertFalse(CpuKernelChoice.narrowTile("amd64", 8, "6x4"));
        assertTrue(CpuKernelChoice.narrowTile("aarch64", 4, "4x3"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CpuKernelChoice.narrowTile("amd64", 8, "6x2"));
        assertTrue(e.getMessage().contains("must be 6x4 or 4x3"), e.getMessage());
        assertEquals(TileGemm.NV * Simd.FL, TileGemm.NR);
        assertEquals(TileGemm.NARROW ? 4 : 6, TileGemm.MR);
    }

    private static void check(Random r, int m, int n, int k, boolean transA, boolean accumulate) {
        int lda = transA ? m + 3 : k + 5;          // A (m, k) stored row major, or Aᵀ (k, m)
        int ldb = n + 2 * Simd.FL;
        int ldc = n + TileGemm.NR;                  // C's rows are wider than the product: the rest stays
        float[] a = random(r, (transA ? k : m) * lda);
        float[] b = random(r, k * ldb);
        float[] c = random(r, m * ldc);
        float[] before = c.clone();
        int ars = transA ? 1 : lda;
        int acs = transA ? lda : 1;
        TileGemm.multiply(m, n, k, a, 0, ars, acs, b, 0, ldb, c, 0, ldc, accumulate);
        String where = "m " + m + " n " + n + " k " + k + (transA ? " Aᵀ" : " A") + (accumulate ? " +=" : " =");
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < ldc; j++) {
                if (j >= n) {
                    assertEquals(before[i * ldc + j], c[i * ldc + j], "outside the product, " + where);
                    continue;
                }
                double want = accumulate ? before[i * ldc + j] : 0;
                double scale = Math.abs(want);
                for (int p = 0; p < k; p++) {
                    double term = (double) a[i * ars + p * acs] * b[p * ldb + j];
                    want += term;
                    scale += Math.abs(term);
                }
                double got = c[i * ldc + j];
                // fp32 fused multiply-adds in order: |error| ≤ (k + 1)·2⁻²⁴·Σ|terms| (a wrong or missing term is far more)
                assertTrue(Math.abs(got - want) <= (k + 1) * 0x1p-24 * scale,
                        where + ": C[" + i + ", " + j + "] = " + got + ", want " + want);
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
