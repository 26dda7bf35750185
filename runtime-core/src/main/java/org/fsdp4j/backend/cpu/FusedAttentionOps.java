// Causal attention on fp32 CPU tensors, one (batch, key/value head) group at a time: each head's
// T×T scores are computed, softmaxed and used while they sit in the core's cache, instead of the
// composite's batched GEMMs and softmax, which stream every (B, H, T, T) buffer through memory
// four times in the forward and eight in the backward (fused, a `small` T = 256 step went from
// 1006 to 896 ms). The saved att is
// only the lower triangle where the caller allocated it so (Ops.causalAttentionSavedShape: what
// the CPU backend asks for in fp32), else the square with zeros above the diagonal; the backward
// needs no other (B, H, T, T) buffer: datt and dpreatt share one T×T scratch per thread, a row of
// datt turned into the same row of dpreatt in place.
//
// A head's q, k, v (and dy) are copied into per-thread float[] scratch, and every product is a
// TileGemm over row tiles of MR query rows (or key columns) against only the keys (or queries)
// the tile meets below the diagonal, so the masked upper triangle is skipped tile by tile
// (OpenBLAS ran these small products at ~56 GFLOP/s in a step). The
// softmax rows are AttentionOps' row loops. Per group, its query heads in order (dk and dv,
// summed over the group, add in a fixed order): the same bits for any thread count; they agree
// with the composite (OpenBLAS's GEMMs) to fp32 rounding (FusedAttentionTest).
package org.fsdp4j.backend.cpu;

import java.util.Arrays;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;
import org.fsdp4j.backend.Shapes.AttentionSizes;

final class FusedAttentionOps {

    private FusedAttentionOps() {
    }

    /** Whether every tensor is fp32 (the fused loops' only dtype; others take the composite). */
    static boolean applies(Tensor... tensors) {
        for (Tensor t : tensors) {
            if (t.dtype() != DType.F32) {
                return false;
            }
        }
        return true;
    }

    /**
     * Where the heads of one operand lie: element (b, head, row r, column c) of the (T, D) matrix
     * of a head is at offset + b·batchStride + head·headStride + r·ld + c of the tensor. Head-major
     * (B, H, T, D) tensors have ld = D; q, k and v read in place from a fused projection (B, T, W)
     * have ld = W, and heads merged side by side into (B, T, H·D) have ld = H·D. Rows move through
     * {@code elements}, the tensor's bulk access.
     */
    record Heads(Elements elements, long offset, long batchStride, long headStride, int ld) {
        /** A head-major (B, heads, T, D) tensor. */
        static Heads headMajor(Tensor t) {
            long d = t.dim(3);
            long tt = t.dim(2);
            return new Heads(Elements.of(t), 0, t.dim(1) * tt * d, tt * d, Math.toIntExact(d));
        }

        /** Heads of width d starting at column {@code column} of each token's row of a (B, T, W) tensor. */
        static Heads tokenMajor(Tensor t, long column, int d) {
            long w = t.dim(2);
            return new Heads(Elements.of(t), column, t.dim(1) * w, d, Math.toIntExact(w));
        }

        /** Element index (within the tensor) of row r of head {@code head} of batch b. */
        long index(int b, long head, long r) {
            return offset + b * batchStride + head * headStride + r * ld;
        }
    }

    /** Head-major attention: q, yHeads (B, H, T, D), k, v (B, Hkv, T, D), sizes checked by Shapes.attention. */
    static void forward(CpuThreads threads, AttentionSizes s, Tensor q, Tensor k, Tensor v, float scale, Tensor att,
                        Tensor yHeads) {
        forward(threads, s, Heads.headMajor(q), Heads.headMajor(k), Heads.headMajor(v), scale, att,
                Heads.headMajor(yHeads));
    }

    static void backward(CpuThreads threads, AttentionSizes s, Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads,
                         float scale, Tensor dq, Tensor dk, Tensor dv) {
        backward(threads, s, Heads.headMajor(q), Heads.headMajor(k), Heads.headMajor(v), att,
                Heads.headMajor(dyHeads), scale, Heads.headMajor(dq), Heads.headMajor(dk), Heads.headMajor(dv));
    }

    /**
     * Attention reading q, k, v in place from qkv (B, T, (H + 2·Hkv)·D) and writing y (B, T, H·D)
     * merged; sizes checked by Shapes.selfAttention.
     */
    static void packedForward(CpuThreads threads, AttentionSizes s, Tensor qkv, float scale, Tensor att, Tensor y) {
        int d = s.d();
        forward(threads, s, Heads.tokenMajor(qkv, 0, d), Heads.tokenMajor(qkv, (long) s.h() * d, d),
                Heads.tokenMajor(qkv, (long) (s.h() + s.kv()) * d, d), scale, att, Heads.tokenMajor(y, 0, d));
    }

    /** The backward of packedForward: dqkv (B, T, (H + 2·Hkv)·D) overwritten from dy (B, T, H·D). */
    static void packedBackward(CpuThreads threads, AttentionSizes s, Tensor qkv, Tensor att, Tensor dy, float scale,
                               Tensor dqkv) {
        int d = s.d();
        long kAt = (long) s.h() * d;
        long vAt = (long) (s.h() + s.kv()) * d;
        backward(threads, s, Heads.tokenMajor(qkv, 0, d), Heads.tokenMajor(qkv, kAt, d), Heads.tokenMajor(qkv, vAt, d),
                att, Heads.tokenMajor(dy, 0, d), scale,
                Heads.tokenMajor(dqkv, 0, d), Heads.tokenMajor(dqkv, kAt, d), Heads.tokenMajor(dqkv, vAt, d));
    }

    private static void forward(CpuThreads threads, AttentionSizes s, Heads q, Heads k, Heads v, float scale, Tensor att,
                                Heads y) {
        int t = s.t();
        int d = s.d();
        Elements ea = Elements.of(att);
        AttRows rows = AttRows.of(att, t);
        threads.forChunks((long) s.b() * s.kv(), 1, (chunk, from, to) -> {
            HeadScratch hs = HeadScratch.get(t, d);
            int tp = hs.tp;
            int dp = hs.dp;
            float[] tile = hs.s;     // (MR, Tp): one row tile's scores, then its att rows
            float[] out = hs.o;      // (MR, Dp): the tile's y rows
            double[] lanes = Simd.laneScratch();
            for (long grp = from; grp < to; grp++) {
                int b = (int) (grp / s.kv());
                int j = (int) (grp % s.kv());
                hs.load(k, b, j, hs.k);
                hs.transpose(hs.k, hs.kt);
                hs.load(v, b, j, hs.v);
                for (int hh = 0; hh < s.group(); hh++) {
                    int h = j * s.group() + hh;
                    long attAt = rows.head((long) b * s.h() + h);
                    hs.load(q, b, h, hs.q);
                    for (int i0 = 0; i0 < t; i0 += TileGemm.MR) {
                        int seen = Math.min(t, i0 + TileGemm.MR);   // rows of the tile see keys [0, seen)
                        // scores of the tile's rows against the keys they see (whole column tiles)
                        TileGemm.multiply(TileGemm.MR, TileGemm.roundUp(seen, TileGemm.NR), d, hs.q, i0 * dp, dp, 1,
                                hs.kt, 0, tp, tile, 0, tp, false);
                        for (int i = i0; i < seen; i++) {
                            int row = (i - i0) * tp;
                            int len = i + 1;   // row i sees keys 0..i
                            AttentionOps.softmaxRowPadded(tile, row, len, scale, lanes);
                            // zeros past the row's keys: for att · v below (columns < seen), and for a square att
                            Arrays.fill(tile, row + len, row + (rows.triangle() ? seen : t), 0f);
                            ea.store(tile, row, attAt + rows.start(i), rows.length(i));
                        }
                        // y rows = att rows · v over the keys the tile sees (0 past each row's own)
                        TileGemm.multiply(TileGemm.MR, dp, seen, tile, 0, tp, 1, hs.v, 0, dp, out, 0, dp, false);
                        for (int i = i0; i < seen; i++) {
                            y.elements.store(out, (i - i0) * dp, y.index(b, h, i), d);
                        }
                    }
                }
            }
        });
    }

    private static void backward(CpuThreads threads, AttentionSizes s, Heads q, Heads k, Heads v, Tensor att, Heads dy,
                                 float scale, Heads dq, Heads dk, Heads dv) {
        int t = s.t();
        int d = s.d();
        Elements ea = Elements.of(att);
        AttRows rows = AttRows.of(att, t);
        threads.forChunks((long) s.b() * s.kv(), 1, (chunk, from, to) -> {
            HeadScratch hs = HeadScratch.get(t, d);
            int tp = hs.tp;
            int dp = hs.dp;
            float[] p = hs.p;        // (Tm, Tp): att, 0 above the diagonal
            float[] ds = hs.ds;      // (Tm, Tp): datt, then dpreatt row by row, 0 above the diagonal
            float[] out = hs.o;      // (MR, Dp): a row tile of dq
            double[] lanes = Simd.laneScratch();
            for (long grp = from; grp < to; grp++) {
                int b = (int) (grp / s.kv());
                int j = (int) (grp % s.kv());
                hs.load(k, b, j, hs.k);
                hs.load(v, b, j, hs.v);
                hs.transpose(hs.v, hs.kt);   // vᵀ (D, Tp)
                for (int hh = 0; hh < s.group(); hh++) {
                    int h = j * s.group() + hh;
                    long attAt = rows.head((long) b * s.h() + h);
                    hs.load(q, b, h, hs.q);
                    hs.load(dy, b, h, hs.dy);
                    for (int i0 = 0; i0 < t; i0 += TileGemm.MR) {
                        int seen = Math.min(t, i0 + TileGemm.MR);
                        int tileEnd = i0 + TileGemm.MR;   // columns the later products read of these rows
                        // datt rows = dy rows · vᵀ over the keys they see
                        TileGemm.multiply(TileGemm.MR, TileGemm.roundUp(seen, TileGemm.NR), d, hs.dy, i0 * dp, dp, 1,
                                hs.kt, 0, tp, ds, i0 * tp, tp, false);
                        // dpreatt row i = scale · att · (datt − Σ att·datt) for keys ≤ i, 0 above
                        for (int i = i0; i < seen; i++) {
                            int row = i * tp;
                            int len = i + 1;
                            ea.load(attAt + rows.start(i), p, row, len);
                            Arrays.fill(p, row + len, row + tileEnd, 0f);
                            AttentionOps.softmaxBackwardRowPadded(p, row, ds, row, len, scale, lanes);
                            Arrays.fill(ds, row + len, row + tileEnd, 0f);
                        }
                        // dq rows = dpreatt rows · k over the keys they see
                        TileGemm.multiply(TileGemm.MR, dp, seen, ds, i0 * tp, tp, 1, hs.k, 0, dp, out, 0, dp, false);
                        for (int i = i0; i < seen; i++) {
                            dq.elements.store(out, (i - i0) * dp, dq.index(b, h, i), d);
                        }
                    }
                    // keys [c0, c0 + MR) are seen by rows [c0, T): dv (+)= attᵀ · dy, dk (+)= dpreattᵀ · q,
                    // summed over the group's heads in order
                    boolean add = hh > 0;
                    for (int c0 = 0; c0 < t; c0 += TileGemm.MR) {
                        int at = c0 * tp + c0;
                        TileGemm.multiply(TileGemm.MR, dp, t - c0, p, at, 1, tp, hs.dy, c0 * dp, dp,
                                hs.dv, c0 * dp, dp, add);
                        TileGemm.multiply(TileGemm.MR, dp, t - c0, ds, at, 1, tp, hs.q, c0 * dp, dp,
                                hs.dk, c0 * dp, dp, add);
                    }
                }
                hs.store(hs.dk, dk, b, j);
                hs.store(hs.dv, dv, b, j);
            }
        });
    }

    /**
     * Where att keeps a head's rows (Ops.causalAttentionSavedShape): the square (B, H, T, T), row i
     * its T probabilities (zeros past i), or the lower triangle (B, H, T·(T + 1)/2), row i its i + 1
     * probabilities from i·(i + 1)/2. The backward reads only the first i + 1 of a row either way.
     */
    record AttRows(boolean triangle, int t) {
        static AttRows of(Tensor att, int t) {
            return new AttRows(att.rank() == 3, t);
        }

        /** Element index of head {@code bh} (= b·H + h)'s first row. */
        long head(long bh) {
            return bh * (triangle ? Shapes.lowerTriangle(t) : (long) t * t);
        }

        /** Offset of row i within its head. */
        long start(int i) {
            return triangle ? (long) i * (i + 1) / 2 : (long) i * t;
        }

        /** Elements of row i that are kept. */
        int length(int i) {
            return triangle ? i + 1 : t;
        }
    }

    /**
     * One thread's float[] operands for a head, padded so that every TileGemm tile lies inside:
     * Tm = T rounded up to MR rows, Tp = Tm rounded up to NR columns, Dp = D rounded up to NR.
     * Padding rows and columns hold whatever they held; the products computed from them are
     * never stored.
     */
    static final class HeadScratch {
        private static final ThreadLocal<HeadScratch> HELD = new ThreadLocal<>();

        final int t;
        final int d;
        final int tp;
        final int dp;
        final float[] q;     // (Tm, Dp) rows of a head: q, k, v, dy, and dk, dv summed over a group
        final float[] k;
        final float[] v;
        final float[] dy;
        final float[] dk;
        final float[] dv;
        final float[] kt;    // (D, Tp): kᵀ in the forward, vᵀ in the backward
        final float[] s;     // (MR, Tp): the forward's row tile of scores
        final float[] o;     // (MR, Dp): a row tile of y or dq
        final float[] p;     // (Tm, Tp): att, for the backward
        final float[] ds;    // (Tm, Tp): datt → dpreatt

        private HeadScratch(int t, int d) {
            this.t = t;
            this.d = d;
            int tm = TileGemm.roundUp(t, TileGemm.MR);
            this.tp = TileGemm.roundUp(tm, TileGemm.NR);
            this.dp = TileGemm.roundUp(d, TileGemm.NR);
            q = new float[tm * dp];
            k = new float[tm * dp];
            v = new float[tm * dp];
            dy = new float[tm * dp];
            dk = new float[tm * dp];
            dv = new float[tm * dp];
            kt = new float[d * tp];
            s = new float[TileGemm.MR * tp];
            o = new float[TileGemm.MR * dp];
            p = new float[tm * tp + Simd.FL];     // + FL: the softmax backward's fp64 loads of the last row (Simd.wideEnd)
            ds = new float[tm * tp + Simd.FL];
        }

        /** This thread's scratch for heads of T rows and D columns (kept while the sizes repeat). */
        static HeadScratch get(int t, int d) {
            HeadScratch held = HELD.get();
            if (held == null || held.t != t || held.d != d) {
                long tm = TileGemm.roundUp(t, TileGemm.MR);
                if (tm * (tm + TileGemm.NR) > Integer.MAX_VALUE - 8) {
                    throw new IllegalArgumentException("fused attention: T = " + t + " needs a T × T scratch per"
                            + " thread larger than a Java array holds; use a shorter sequence");
                }
                held = new HeadScratch(t, d);
                HELD.set(held);
            }
            return held;
        }

        /** rows[r·Dp .. r·Dp + D) = row r of head {@code head} of batch b, for r < T. */
        void load(Heads heads, int b, int head, float[] rows) {
            for (int r = 0; r < t; r++) {
                heads.elements.load(heads.index(b, head, r), rows, r * dp, d);
            }
        }

        /** Row r of head {@code head} of batch b = rows[r·Dp .. r·Dp + D), for r < T. */
        void store(float[] rows, Heads heads, int b, int head) {
            for (int r = 0; r < t; r++) {
                heads.elements.store(rows, r * dp, heads.index(b, head, r), d);
            }
        }

        /** to (D, Tp) = the transpose of rows (T, Dp)'s first D columns. */
        void transpose(float[] rows, float[] to) {
            for (int r = 0; r < t; r++) {
                int from = r * dp;
                for (int c = 0; c < d; c++) {
                    to[c * tp + r] = rows[from + c];
                }
            }
        }
    }
}
