// The CPU backend's fp32 GEMM for Linear-sized products, in Java: TileGemm's
// MR × NR register tile (6 × 64 with AVX-512, 4 × 24 with AVX2) over op(B) packed into panels of NR
// columns (NR floats per k) and op(A) staged in rows (or, transposed, in runs of the rows), in
// per-thread float[] (Scratch). On a Zen 4 machine the tile runs the Linear shapes of `small` at
// 114–115 GFLOP/s on one core once its operands are in float[] (the core's peak is 116), the
// whole call (staging, packing and stores included) at 102–108 with operands from memory;
// OpenBLAS 0.3.31 ran these calls at 92–103 with operands in cache. With AVX2 only (16
// registers, 4 × 24 tile) it reaches ~0.8 of OpenBLAS, so there fp32 products stay OpenBLAS's by
// default (ENABLED).
//
// Blocking (GotoBLAS's, with C kept in a float[] block while its k-sum runs): for each block of
// ≤ NC columns, op(B) is packed whole (k × NC); for each block of MC rows, op(A) is staged (its
// rows whole, in one pass along memory: at k > KC 1.5–2.5% faster than KC at a time;
// transposed, KC deep at a time) and read KC deep at a time, and every (row tile, column
// panel) of the block's C accumulates in a per-thread float[] (MC × NC); the block goes to C when
// its k-sums are complete, a whole row per bulk put (a put per row and 64-column panel, ~28 ns
// each, took twice as long in all). MC × KC of A (192 KiB) and one KC × NR panel of B
// (128 KiB; 48 KiB with AVX2's 24 columns) fit in a core's L2 (staged rows beyond KC wait in L2
// or L3).
//
// A column block's row blocks are the unit of work: a one-thread caller offers them to blocked
// in-process rank threads (CoreShare), which read its packed op(B) and use their own A and C
// buffers. A GemmEpilogue (a bias, a GELU, the GELU's gradient: the fused Linear ops) takes a
// block's rows just before they go out.
//
// Bits: every element of C is one fused multiply-add chain over p = 0 .. k−1 in order, started
// from 0 (from β·C when α = 1 and β ≠ 0), then scaled by α and added to β·C when α ≠ 1. It does
// not depend on the blocking, on the extent of the call, or on which thread runs it: a C cut into
// tiles per thread (GemmOp) has the same bits at any thread count. They are not OpenBLAS's bits.
package org.fsdp4j.backend.cpu;

import java.nio.FloatBuffer;
import java.util.Arrays;

final class PanelGemm {

    /** Rows of op(A) staged at once (a multiple of TileGemm.MR, 4 or 6). */
    static final int MC = 96;
    /** Depth of op(A) staged at once. */
    static final int KC = 512;
    /** Floats of packed op(B) held at once (8 MiB): the column block NC is this over k. */
    static final int B_FLOATS = 1 << 21;

    private static final int MR = TileGemm.MR;
    private static final int NR = TileGemm.NR;

    /**
     * Whether fp32 GEMMs take this kernel: by default where the tile has 32 vector registers, and
     * not on x86 below AVX-512 nor where OpenBLAS's AVX-512 kernels are faster
     * ({@link CpuKernelChoice#javaGemm(String, boolean, boolean)});
     * {@code -Dfsdp4j.cpuGemm=java|openblas} picks one (for comparing the two on one build).
     */
    static final boolean ENABLED = CpuKernelChoice.javaGemm();

    /** Scratch slots (per thread; a GemmOp task runs nothing else that holds one). */
    private static final int A_ROWS = 0;
    private static final int B_PANELS = 1;
    private static final int C_BLOCK = 2;
    private static final int STAGE = 3;

    private PanelGemm() {
    }

    /**
     * Whether an m × n × k product (the whole call, not a tile of it: the choice must not depend
     * on the thread count) runs here: at least one whole row tile and half a column panel, and
     * enough work that packing both operands pays. Smaller products stay OpenBLAS's.
     */
    static boolean suits(int m, int n, int k) {
        return ENABLED && m >= MR && n >= NR / 2 && k >= 16 && (double) m * n * k >= 1 << 20;
    }

    /**
     * C (m × n) = α · op(A) · op(B) + β · C on fp32 buffers, the BLAS row-major convention:
     * op(A)(i, p) = a[aOff + i·lda + p], or a[aOff + p·lda + i] when transA; op(B)(p, j) =
     * b[bOff + p·ldb + j], or b[bOff + j·ldb + p] when transB; C(i, j) = c[cOff + i·ldc + j].
     * β = 0 never reads C. With {@code share} (the caller runs the call on one thread) a column
     * block's row blocks are offered to blocked in-process rank threads (CoreShare), which read
     * this thread's packed op(B); the bits are the same whoever runs a row block.
     */
    static void sgemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                      FloatBuffer a, long aOff, int lda, FloatBuffer b, long bOff, int ldb,
                      float beta, FloatBuffer c, long cOff, int ldc, boolean share) {
        sgemm(transA, transB, m, n, k, alpha, a, aOff, lda, b, bOff, ldb, beta, c, cOff, ldc, share, null, 0);
    }

    /**
     * As above, and with an {@code epilogue} (α = 1, β = 0 only) that writes each finished row block
     * of C; {@code col} is this call's first column in the product the epilogue was made for (a
     * bias's index). A bias is added in fp32 after the product is rounded, as a separate addBias
     * would (the same bits), but while C's rows are in cache.
     */
    static void sgemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                      FloatBuffer a, long aOff, int lda, FloatBuffer b, long bOff, int ldb,
                      float beta, FloatBuffer c, long cOff, int ldc, boolean share, GemmEpilogue epilogue, int col) {
        if (epilogue != null && (alpha != 1f || beta != 0f)) {
            throw new IllegalArgumentException("an epilogue needs alpha 1 and beta 0, got " + alpha + " and " + beta);
        }
        if (m <= 0 || n <= 0) {
            return;
        }
        boolean fromC = alpha == 1f && beta != 0f;   // the k-sum starts from β·C
        int ncMax = Math.max(NR, Math.min(TileGemm.roundUp(n, NR), B_FLOATS / Math.max(1, k) / NR * NR));
        int rowBlocks = (m + MC - 1) / MC;
        for (int jc = 0; jc < n; jc += ncMax) {
            int nb = Math.min(ncMax, n - jc);
            int nbp = TileGemm.roundUp(nb, NR);
            float[] bp = Scratch.floats(B_PANELS, Math.toIntExact((long) k * nbp));   // (nbp / NR, k, NR)
            if (transB) {
                packBTransposed(b, bOff + (long) jc * ldb, ldb, k, nb, nbp / NR, bp);
            } else {
                packB(b, bOff + jc, ldb, k, nb, bp);
            }
            ColumnBlock block = new ColumnBlock(transA, m, k, alpha, a, aOff, lda, bp, nb, nbp, fromC, beta, c,
                    cOff + jc, ldc, epilogue, col + jc);
            if (share) {
                CoreShare.run(rowBlocks, block::rows);
            } else {
                for (int r = 0; r < rowBlocks; r++) {
                    block.rows(r);
                }
            }
        }
    }

    /** One column block of a call, op(B) packed: its row blocks of MC rows, run by any thread. */
    private record ColumnBlock(boolean transA, int m, int k, float alpha, FloatBuffer a, long aOff, int lda,
                               float[] bp, int nb, int nbp, boolean fromC, float beta, FloatBuffer c, long cOff,
                               int ldc, GemmEpilogue epilogue, int col) {

        /** Rows [r·MC, r·MC + MC) of this block's C, with the running thread's A and C buffers. */
        void rows(int r) {
            int ic = r * MC;
            int mb = Math.min(MC, m - ic);
            int tiles = (mb + MR - 1) / MR;
            int panels = nbp / NR;
            float[] cs = Scratch.floats(C_BLOCK, tiles * MR * nbp);             // (tiles·MR, nbp)
            if (fromC) {
                loadC(c, cOff + (long) ic * ldc, ldc, mb, nb, nbp, beta, cs);
            } else if (k == 0) {
                Arrays.fill(cs, 0, tiles * MR * nbp, 0f);
            }
            float[] rows = null;                                            // (tiles·MR, k): the block's rows, whole
            if (!transA && k > 0) {
                rows = Scratch.floats(A_ROWS, tiles * MR * k);
                stageA(a, aOff + (long) ic * lda, lda, mb, k, tiles * MR, rows);
            }
            for (int pc = 0; pc < k; pc += KC) {
                int kb = Math.min(KC, k - pc);
                float[] ap;
                int a0;
                int ars;
                int acs;
                if (transA) {                                               // (kb, tiles·MR): kb runs of the rows
                    ap = Scratch.floats(A_ROWS, tiles * MR * kb);
                    stageATransposed(a, aOff + (long) pc * lda + ic, lda, mb, kb, tiles * MR, ap);
                    a0 = 0;
                    ars = 1;
                    acs = tiles * MR;
                } else {                                                    // columns [pc, pc + kb) of the rows
                    ap = rows;
                    a0 = pc;
                    ars = k;
                    acs = 1;
                }
                boolean accumulate = pc > 0 || fromC;
                for (int jp = 0; jp < panels; jp++) {
                    int bAt = (jp * k + pc) * NR;
                    for (int t = 0; t < tiles; t++) {
                        TileGemm.tile(kb, ap, a0 + t * MR * ars, ars, acs, bp, bAt, NR,
                                cs, t * MR * nbp + jp * NR, nbp, accumulate);
                    }
                }
            }
            // the block's k-sums are complete: whole rows out, one bulk put each (half the time of a put per panel)
            if (epilogue != null) {                                         // α = 1, β = 0
                epilogue.finish(cs, nbp, mb, nb, c, cOff + (long) ic * ldc, ldc, col);
                return;
            }
            storeC(cs, nbp, fromC ? 1f : alpha, fromC ? 0f : beta, c, cOff + (long) ic * ldc, ldc, mb, nb);
        }
    }

    /** to (mp, kb) = rows [0, mb) of A (row-major at a[at], leading dim lda), kb deep; rows past mb 0. */
    private static void stageA(FloatBuffer a, long at, int lda, int mb, int kb, int mp, float[] to) {
        for (int i = 0; i < mb; i++) {
            a.get((int) (at + (long) i * lda), to, i * kb, kb);
        }
        Arrays.fill(to, mb * kb, mp * kb, 0f);
    }

    /** to (kb, mp) = kb runs of mb elements of A stored transposed (op(A)(i, p) = a[at + p·lda + i]); 0 past mb. */
    private static void stageATransposed(FloatBuffer a, long at, int lda, int mb, int kb, int mp, float[] to) {
        for (int p = 0; p < kb; p++) {
            a.get((int) (at + (long) p * lda), to, p * mp, mb);
            if (mb < mp) {
                Arrays.fill(to, p * mp + mb, (p + 1) * mp, 0f);
            }
        }
    }

    /**
     * bp (panels, k, NR) = columns [0, nb) of B (k × n row-major at b[at]); columns past nb 0.
     * Each row's panels straight from B, one bulk get each: for a 1024 × 1536 B from memory 0.65–0.71
     * ms, against 1.10–1.35 for the row staged whole and then copied out per panel.
     */
    private static void packB(FloatBuffer b, long at, int ldb, int k, int nb, float[] bp) {
        int full = nb / NR;                                                 // whole panels; then one partial, or none
        int tail = nb - full * NR;
        for (int p = 0; p < k; p++) {
            int row = (int) (at + (long) p * ldb);
            for (int jp = 0; jp < full; jp++) {
                b.get(row + jp * NR, bp, (jp * k + p) * NR, NR);
            }
            if (tail > 0) {
                int to = (full * k + p) * NR;
                b.get(row + full * NR, bp, to, tail);
                Arrays.fill(bp, to + tail, to + NR, 0f);
            }
        }
    }

    /** packB for B stored transposed (n × k, op(B)(p, j) = b[at + j·ldb + p]): each panel is a transpose. */
    private static void packBTransposed(FloatBuffer b, long at, int ldb, int k, int nb, int panels, float[] bp) {
        float[] rows = Scratch.floats(STAGE, NR * k);                       // (NR, k): a panel's columns
        for (int jp = 0; jp < panels; jp++) {
            for (int jj = 0; jj < NR; jj++) {
                int j = jp * NR + jj;
                if (j < nb) {
                    b.get((int) (at + (long) j * ldb), rows, jj * k, k);
                } else {
                    Arrays.fill(rows, jj * k, (jj + 1) * k, 0f);
                }
            }
            int base = jp * k * NR;
            for (int p0 = 0; p0 < k; p0 += 8) {                             // 8 rows of the panel at a time
                int p1 = Math.min(k, p0 + 8);
                for (int jj = 0; jj < NR; jj++) {
                    int from = jj * k;
                    for (int p = p0; p < p1; p++) {
                        bp[base + p * NR + jj] = rows[from + p];
                    }
                }
            }
        }
    }

    /** cs rows [0, mb), columns [0, nb) = β · C; the padding is left as it is (never stored). */
    private static void loadC(FloatBuffer c, long at, int ldc, int mb, int nb, int nbp, float beta, float[] cs) {
        for (int r = 0; r < mb; r++) {
            c.get((int) (at + (long) r * ldc), cs, r * nbp, nb);
            if (beta != 1f) {
                for (int j = r * nbp; j < r * nbp + nb; j++) {
                    cs[j] *= beta;
                }
            }
        }
    }

    /** C rows [0, mb), columns [0, w) = α · cs + β · C (β = 0: C not read). */
    private static void storeC(float[] cs, int nbp, float alpha, float beta, FloatBuffer c, long at, int ldc,
                               int mb, int w) {
        if (alpha == 1f && beta == 0f) {
            for (int r = 0; r < mb; r++) {
                c.put((int) (at + (long) r * ldc), cs, r * nbp, w);
            }
            return;
        }
        float[] old = Scratch.floats(STAGE, w);
        for (int r = 0; r < mb; r++) {
            int to = (int) (at + (long) r * ldc);
            int from = r * nbp;
            if (beta != 0f) {
                c.get(to, old, 0, w);
            }
            for (int j = 0; j < w; j++) {
                old[j] = beta == 0f ? alpha * cs[from + j] : alpha * cs[from + j] + beta * old[j];
            }
            c.put(to, old, 0, w);
        }
    }
}
