// A small fp32 GEMM on float[] for the fused attention's per-head products:
// at a head's shapes (64 rows × ≤ T × D = 64) OpenBLAS spends most of a call packing and setting
// up, and ran them at ~56 GFLOP/s inside a training step; this register-tiled kernel runs them
// at 130–170 on one core (hot), with its operands in per-thread scratch that stays in cache.
//
// C[i, j] (+)= Σ_p A(i, p)·B[p, j], with A read through strides (so Aᵀ costs nothing), B and C row
// major. The kernel holds an MR × NR tile of C in registers and walks p once, broadcasting A's MR
// elements against B's NV vectors. Its shape follows the machine's register file: 6 rows × 4
// vectors (24 accumulators of AVX-512's, or an ARM core's, 32 vector registers), or 4 × 3 (12 of
// AVX2's 16, with three of B and A's broadcast). The wide tile's 24 accumulators do not fit in 16
// registers, and C2 spilled them: one Zen 3 core ran whole GEMMs at 21–33 GFLOP/s with it, 65–67
// with 4 × 3 (6 × 2: 57–62), OpenBLAS 71–84.
// Callers size their scratch so that every tile lies inside it: m a multiple of MR, n of NR; rows
// and columns of the padding are computed and ignored.
//
// Bits: each C element is a fused multiply-add chain over p in order (one rounding per step),
// independent of the tile it falls in and of the thread that runs it: deterministic, but not
// OpenBLAS's rounding.
package org.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

final class TileGemm {

    /** Whether this machine takes the 4 × 3-vector tile (16 vector registers) instead of 6 × 4 (CpuKernelChoice). */
    static final boolean NARROW = CpuKernelChoice.narrowTile();
    /** Rows of a C tile. */
    static final int MR = NARROW ? 4 : 6;
    /** Vectors in a row of a C tile. */
    static final int NV = NARROW ? 3 : 4;
    /** Columns of a C tile. */
    static final int NR = NV * Simd.FL;

    private static final VectorSpecies<Float> F = Simd.F;
    private static final int FL = Simd.FL;

    private TileGemm() {
    }

    /** The smallest multiple of {@code unit} that is at least n. */
    static int roundUp(int n, int unit) {
        return (n + unit - 1) / unit * unit;
    }

    /**
     * C[i, j] (+)= Σ_{p < k} A(i, p)·B[p, j] for i < m (a multiple of MR), j < n (a multiple of NR);
     * A(i, p) = a[aOff + i·ars + p·acs], B[p, j] = b[bOff + p·ldb + j], C[i, j] = c[cOff + i·ldc + j].
     * {@code accumulate} adds to C, otherwise C is overwritten.
     */
    static void multiply(int m, int n, int k, float[] a, int aOff, int ars, int acs, float[] b, int bOff, int ldb,
                         float[] c, int cOff, int ldc, boolean accumulate) {
        for (int i = 0; i < m; i += MR) {
            for (int j = 0; j < n; j += NR) {
                tile(k, a, aOff + i * ars, ars, acs, b, bOff + j, ldb, c, cOff + i * ldc + j, ldc, accumulate);
            }
        }
    }

    /** One MR × NR tile of C (see multiply), at a[aOff], b[bOff] and c[cOff], on the machine's tile. */
    static void tile(int k, float[] a, int aOff, int ars, int acs, float[] b, int bOff, int ldb, float[] c, int cOff,
                     int ldc, boolean accumulate) {
        if (NARROW) {
            tile4x3(k, a, aOff, ars, acs, b, bOff, ldb, c, cOff, ldc, accumulate);
        } else {
            tile6x4(k, a, aOff, ars, acs, b, bOff, ldb, c, cOff, ldc, accumulate);
        }
    }

    /**
     * A 6 × 4-vector tile (see tile). The 24 accumulators are written out one by one on purpose: C2
     * keeps named vector locals in registers, where an array of vectors (or a loop over them) would
     * be objects on the heap.
     */
    @CompiledAlone
    static void tile6x4(int k, float[] a, int aOff, int ars, int acs, float[] b, int bOff, int ldb, float[] c, int cOff,
                       int ldc, boolean accumulate) {
        int r1 = cOff + ldc;
        int r2 = r1 + ldc;
        int r3 = r2 + ldc;
        int r4 = r3 + ldc;
        int r5 = r4 + ldc;
        FloatVector c00;
        FloatVector c01;
        FloatVector c02;
        FloatVector c03;
        FloatVector c10;
        FloatVector c11;
        FloatVector c12;
        FloatVector c13;
        FloatVector c20;
        FloatVector c21;
        FloatVector c22;
        FloatVector c23;
        FloatVector c30;
        FloatVector c31;
        FloatVector c32;
        FloatVector c33;
        FloatVector c40;
        FloatVector c41;
        FloatVector c42;
        FloatVector c43;
        FloatVector c50;
        FloatVector c51;
        FloatVector c52;
        FloatVector c53;
        if (accumulate) {
            c00 = FloatVector.fromArray(F, c, cOff);
            c01 = FloatVector.fromArray(F, c, cOff + FL);
            c02 = FloatVector.fromArray(F, c, cOff + 2 * FL);
            c03 = FloatVector.fromArray(F, c, cOff + 3 * FL);
            c10 = FloatVector.fromArray(F, c, r1);
            c11 = FloatVector.fromArray(F, c, r1 + FL);
            c12 = FloatVector.fromArray(F, c, r1 + 2 * FL);
            c13 = FloatVector.fromArray(F, c, r1 + 3 * FL);
            c20 = FloatVector.fromArray(F, c, r2);
            c21 = FloatVector.fromArray(F, c, r2 + FL);
            c22 = FloatVector.fromArray(F, c, r2 + 2 * FL);
            c23 = FloatVector.fromArray(F, c, r2 + 3 * FL);
            c30 = FloatVector.fromArray(F, c, r3);
            c31 = FloatVector.fromArray(F, c, r3 + FL);
            c32 = FloatVector.fromArray(F, c, r3 + 2 * FL);
            c33 = FloatVector.fromArray(F, c, r3 + 3 * FL);
            c40 = FloatVector.fromArray(F, c, r4);
            c41 = FloatVector.fromArray(F, c, r4 + FL);
            c42 = FloatVector.fromArray(F, c, r4 + 2 * FL);
            c43 = FloatVector.fromArray(F, c, r4 + 3 * FL);
            c50 = FloatVector.fromArray(F, c, r5);
            c51 = FloatVector.fromArray(F, c, r5 + FL);
            c52 = FloatVector.fromArray(F, c, r5 + 2 * FL);
            c53 = FloatVector.fromArray(F, c, r5 + 3 * FL);
        } else {
            c00 = FloatVector.zero(F);
            c01 = c00;
            c02 = c00;
            c03 = c00;
            c10 = c00;
            c11 = c00;
            c12 = c00;
            c13 = c00;
            c20 = c00;
            c21 = c00;
            c22 = c00;
            c23 = c00;
            c30 = c00;
            c31 = c00;
            c32 = c00;
            c33 = c00;
            c40 = c00;
            c41 = c00;
            c42 = c00;
            c43 = c00;
            c50 = c00;
            c51 = c00;
            c52 = c00;
            c53 = c00;
        }
        for (int p = 0; p < k; p++) {
            int bp = bOff + p * ldb;
            FloatVector b0 = FloatVector.fromArray(F, b, bp);
            FloatVector b1 = FloatVector.fromArray(F, b, bp + FL);
            FloatVector b2 = FloatVector.fromArray(F, b, bp + 2 * FL);
            FloatVector b3 = FloatVector.fromArray(F, b, bp + 3 * FL);
            int ap = aOff + p * acs;
            FloatVector a0 = FloatVector.broadcast(F, a[ap]);
            c00 = a0.fma(b0, c00);
            c01 = a0.fma(b1, c01);
            c02 = a0.fma(b2, c02);
            c03 = a0.fma(b3, c03);
            FloatVector a1 = FloatVector.broadcast(F, a[ap + ars]);
            c10 = a1.fma(b0, c10);
            c11 = a1.fma(b1, c11);
            c12 = a1.fma(b2, c12);
            c13 = a1.fma(b3, c13);
            FloatVector a2 = FloatVector.broadcast(F, a[ap + 2 * ars]);
            c20 = a2.fma(b0, c20);
            c21 = a2.fma(b1, c21);
            c22 = a2.fma(b2, c22);
            c23 = a2.fma(b3, c23);
            FloatVector a3 = FloatVector.broadcast(F, a[ap + 3 * ars]);
            c30 = a3.fma(b0, c30);
            c31 = a3.fma(b1, c31);
            c32 = a3.fma(b2, c32);
            c33 = a3.fma(b3, c33);
            FloatVector a4 = FloatVector.broadcast(F, a[ap + 4 * ars]);
            c40 = a4.fma(b0, c40);
            c41 = a4.fma(b1, c41);
            c42 = a4.fma(b2, c42);
            c43 = a4.fma(b3, c43);
            FloatVector a5 = FloatVector.broadcast(F, a[ap + 5 * ars]);
            c50 = a5.fma(b0, c50);
            c51 = a5.fma(b1, c51);
            c52 = a5.fma(b2, c52);
            c53 = a5.fma(b3, c53);
        }
        c00.intoArray(c, cOff);
        c01.intoArray(c, cOff + FL);
        c02.intoArray(c, cOff + 2 * FL);
        c03.intoArray(c, cOff + 3 * FL);
        c10.intoArray(c, r1);
        c11.intoArray(c, r1 + FL);
        c12.intoArray(c, r1 + 2 * FL);
        c13.intoArray(c, r1 + 3 * FL);
        c20.intoArray(c, r2);
        c21.intoArray(c, r2 + FL);
        c22.intoArray(c, r2 + 2 * FL);
        c23.intoArray(c, r2 + 3 * FL);
        c30.intoArray(c, r3);
        c31.intoArray(c, r3 + FL);
        c32.intoArray(c, r3 + 2 * FL);
        c33.intoArray(c, r3 + 3 * FL);
        c40.intoArray(c, r4);
        c41.intoArray(c, r4 + FL);
        c42.intoArray(c, r4 + 2 * FL);
        c43.intoArray(c, r4 + 3 * FL);
        c50.intoArray(c, r5);
        c51.intoArray(c, r5 + FL);
        c52.intoArray(c, r5 + 2 * FL);
        c53.intoArray(c, r5 + 3 * FL);
    }

    /** A 4 × 3-vector tile (see tile6x4): 12 accumulators, three vectors of B and A's broadcast in 16 registers. */
    @CompiledAlone
    static void tile4x3(int k, float[] a, int aOff, int ars, int acs, float[] b, int bOff, int ldb, float[] c, int cOff,
                        int ldc, boolean accumulate) {
        int r1 = cOff + ldc;
        int r2 = r1 + ldc;
        int r3 = r2 + ldc;
        FloatVector c00;
        FloatVector c01;
        FloatVector c02;
        FloatVector c10;
        FloatVector c11;
        FloatVector c12;
        FloatVector c20;
        FloatVector c21;
        FloatVector c22;
        FloatVector c30;
        FloatVector c31;
        FloatVector c32;
        if (accumulate) {
            c00 = FloatVector.fromArray(F, c, cOff);
            c01 = FloatVector.fromArray(F, c, cOff + FL);
            c02 = FloatVector.fromArray(F, c, cOff + 2 * FL);
            c10 = FloatVector.fromArray(F, c, r1);
            c11 = FloatVector.fromArray(F, c, r1 + FL);
            c12 = FloatVector.fromArray(F, c, r1 + 2 * FL);
            c20 = FloatVector.fromArray(F, c, r2);
            c21 = FloatVector.fromArray(F, c, r2 + FL);
            c22 = FloatVector.fromArray(F, c, r2 + 2 * FL);
            c30 = FloatVector.fromArray(F, c, r3);
            c31 = FloatVector.fromArray(F, c, r3 + FL);
            c32 = FloatVector.fromArray(F, c, r3 + 2 * FL);
        } else {
            c00 = FloatVector.zero(F);
            c01 = c00;
            c02 = c00;
            c10 = c00;
            c11 = c00;
            c12 = c00;
            c20 = c00;
            c21 = c00;
            c22 = c00;
            c30 = c00;
            c31 = c00;
            c32 = c00;
        }
        for (int p = 0; p < k; p++) {
            int bp = bOff + p * ldb;
            FloatVector b0 = FloatVector.fromArray(F, b, bp);
            FloatVector b1 = FloatVector.fromArray(F, b, bp + FL);
            FloatVector b2 = FloatVector.fromArray(F, b, bp + 2 * FL);
            int ap = aOff + p * acs;
            FloatVector a0 = FloatVector.broadcast(F, a[ap]);
            c00 = a0.fma(b0, c00);
            c01 = a0.fma(b1, c01);
            c02 = a0.fma(b2, c02);
            FloatVector a1 = FloatVector.broadcast(F, a[ap + ars]);
            c10 = a1.fma(b0, c10);
            c11 = a1.fma(b1, c11);
            c12 = a1.fma(b2, c12);
            FloatVector a2 = FloatVector.broadcast(F, a[ap + 2 * ars]);
            c20 = a2.fma(b0, c20);
            c21 = a2.fma(b1, c21);
            c22 = a2.fma(b2, c22);
            FloatVector a3 = FloatVector.broadcast(F, a[ap + 3 * ars]);
            c30 = a3.fma(b0, c30);
            c31 = a3.fma(b1, c31);
            c32 = a3.fma(b2, c32);
        }
        c00.intoArray(c, cOff);
        c01.intoArray(c, cOff + FL);
        c02.intoArray(c, cOff + 2 * FL);
        c10.intoArray(c, r1);
        c11.intoArray(c, r1 + FL);
        c12.intoArray(c, r1 + 2 * FL);
        c20.intoArray(c, r2);
        c21.intoArray(c, r2 + FL);
        c22.intoArray(c, r2 + 2 * FL);
        c30.intoArray(c, r3);
        c31.intoArray(c, r3 + FL);
        c32.intoArray(c, r3 + 2 * FL);
    }
}
