// TileGemm, the fused attention's register-tiled product, against a plain fp64 reference: A read
// straight and transposed through its strides, C overwritten and accumulated, k from 1 to beyond
// a tile's worth, and C's tiles placed inside a wider row (ldc > n) without touching the rest;
// columns past the last whole tile go through one-vector tiles, with the whole tile's bits.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
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

    /** n a multiple of one vector, not of a whole tile: the last columns in one-vector tiles. */
    @Test
    void columnsPastTheLastWholeTileAreComputedInOneVectorTiles() {
        Random r = new Random(5);
        for (int n : new int[] {Simd.FL, 3 * Simd.FL, TileGemm.NR + Simd.FL, 2 * TileGemm.NR + 2 * Simd.FL}) {
            for (boolean accumulate : new boolean[] {false, true}) {
                check(r, TileGemm.MR, n, 37, true, accumulate);
                check(r, 2 * TileGemm.MR, n, 64, false, accumulate);
            }
        }
    }

    /** An element's bits do not depend on whether a whole tile or a one-vector tile computed it. */
    @Test
    void oneVectorTilesHaveTheWholeTilesBits() {
        Random r = new Random(7);
        int m = TileGemm.MR;
        int n = TileGemm.NR;
        int k = 93;
        float[] a = random(r, m * k);
        float[] b = random(r, k * n);
        float[] whole = new float[m * n];
        float[] narrow = new float[m * n];
        TileGemm.multiply(m, n, k, a, 0, k, 1, b, 0, n, whole, 0, n, false);
        for (int j = 0; j < n; j += Simd.FL) {   // one vector of columns a call: every column in a one-vector tile
            TileGemm.multiply(m, Simd.FL, k, a, 0, k, 1, b, j, n, narrow, j, n, false);
        }
        for (int i = 0; i < m * n; i++) {
            assertEquals(Float.floatToRawIntBits(whole[i]), Float.floatToRawIntBits(narrow[i]), "element " + i);
        }
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
