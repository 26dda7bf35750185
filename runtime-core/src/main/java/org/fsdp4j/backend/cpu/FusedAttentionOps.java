// Causal attention on fp32 CPU tensors, one (batch, key/value head) group at a time: each head's
// T×T scores are computed, softmaxed and used while they sit in the core's cache, instead of the
// composite's batched GEMMs and softmax, which stream every (B, H, T, T) buffer through memory
// four times in the forward and eight in the backward (bench/NOTES.md, 2.6: in a step those GEMMs
// ran at about half their rate on warm caches). Besides the saved att, the backward needs no
// (B, H, T, T) buffer: datt and dpreatt share one T×T scratch per thread, a row of datt turned
// into the same row of dpreatt in place.
//
// Per group, its query heads in order (so dk and dv, summed over the group, add in a fixed order:
// the same bits for any thread count); every GEMM is one single-threaded OpenBLAS call over a
// block of ROWS query rows (or key columns) and only the keys (or queries) it meets below the
// diagonal, so the masked upper triangle is skipped block by block; the softmax rows are
// AttentionOps' row loops. For Hkv = H the results equal the composite's bits (FusedAttentionTest).
package org.fsdp4j.backend.cpu;

import java.nio.FloatBuffer;
import java.util.Arrays;
import org.bytedeco.javacpp.FloatPointer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes.AttentionSizes;

final class FusedAttentionOps {

    /**
     * Query rows per block: a block of rows [r0, r1) sees keys [0, r1) only, so the GEMMs skip the
     * masked upper triangle block by block (at T = 256, 10 of 16 blocks of 64 are computed).
     */
    static final int ROWS = 64;

    /** Per-thread fp32 T×T scratch for the backward's datt → dpreatt rows. */
    private static final ThreadLocal<FloatPointer[]> SCRATCH = ThreadLocal.withInitial(() -> new FloatPointer[1]);

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
     * have ld = W, and heads merged side by side into (B, T, H·D) have ld = H·D.
     */
    record Heads(Tensor tensor, long offset, long batchStride, long headStride, int ld) {
        /** A head-major (B, heads, T, D) tensor. */
        static Heads headMajor(Tensor t) {
            long d = t.dim(3);
            long tt = t.dim(2);
            return new Heads(t, 0, t.dim(1) * tt * d, tt * d, Math.toIntExact(d));
        }

        /** Heads of width d starting at column {@code column} of each token's row of a (B, T, W) tensor. */
        static Heads tokenMajor(Tensor t, long column, int d) {
            long w = t.dim(2);
            return new Heads(t, column, t.dim(1) * w, d, Math.toIntExact(w));
        }

        /** fp32 pointer to row r of head {@code head} of batch b. */
        FloatPointer row(int b, long head, long r) {
            return at(tensor, offset + b * batchStride + head * headStride + r * ld);
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
        threads.forChunks((long) s.b() * s.kv(), 1, (chunk, from, to) -> {
            float[] row = Scratch.floats(0, t);
            double[] lanes = Simd.laneScratch();
            for (long grp = from; grp < to; grp++) {
                int b = (int) (grp / s.kv());
                int j = (int) (grp % s.kv());
                for (int hh = 0; hh < s.group(); hh++) {
                    int h = j * s.group() + hh;
                    long attAt = ((long) b * s.h() + h) * t * t;
                    for (int r0 = 0; r0 < t; r0 += ROWS) {
                        int r1 = Math.min(t, r0 + ROWS);   // rows [r0, r1) see keys [0, r1)
                        // scores of the block's rows against the keys they see, then the causal softmax row by row
                        OpenBlas.sgemm(false, true, r1 - r0, r1, d, 1f, q.row(b, h, r0), q.ld, k.row(b, j, 0), k.ld,
                                0f, at(att, attAt + (long) r0 * t), t);
                        for (int i = r0; i < r1; i++) {
                            int len = i + 1;   // row i sees keys 0..i
                            ea.load(attAt + (long) i * t, row, 0, len);
                            AttentionOps.softmaxRow(row, len, scale, lanes);
                            Arrays.fill(row, len, t, 0f);
                            ea.store(row, 0, attAt + (long) i * t, t);
                        }
                        // y rows = att rows · v over the keys they see (the rest of each row is 0)
                        OpenBlas.sgemm(false, false, r1 - r0, d, r1, 1f, at(att, attAt + (long) r0 * t), t,
                                v.row(b, j, 0), v.ld, 0f, y.row(b, h, r0), y.ld);
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
        threads.forChunks((long) s.b() * s.kv(), 1, (chunk, from, to) -> {
            float[] a = Scratch.floats(0, t);
            float[] g = Scratch.floats(1, t);
            float[] dp = Scratch.floats(2, t);
            double[] lanes = Simd.laneScratch();
            FloatPointer scratch = scratch((long) t * t);      // (T, T): datt, then dpreatt row by row
            FloatBuffer rows = scratch.asBuffer();
            for (long grp = from; grp < to; grp++) {
                int b = (int) (grp / s.kv());
                int j = (int) (grp % s.kv());
                for (int hh = 0; hh < s.group(); hh++) {
                    int h = j * s.group() + hh;
                    long attAt = ((long) b * s.h() + h) * t * t;
                    float beta = hh == 0 ? 0f : 1f;   // dk, dv sum over the group's heads
                    for (int r0 = 0; r0 < t; r0 += ROWS) {
                        int r1 = Math.min(t, r0 + ROWS);
                        // datt rows = dy rows · vᵀ over the keys they see
                        OpenBlas.sgemm(false, true, r1 - r0, r1, d, 1f, dy.row(b, h, r0), dy.ld, v.row(b, j, 0), v.ld,
                                0f, scratch.position((long) r0 * t), t);
                        // dpreatt row i = scale · att · (datt − Σ att·datt) for j ≤ i, 0 above
                        // (the GEMMs below read the block whole)
                        for (int i = r0; i < r1; i++) {
                            int len = i + 1;
                            ea.load(attAt + (long) i * t, a, 0, len);
                            rows.get(i * t, g, 0, len);
                            Arrays.fill(dp, 0, t, 0f);
                            AttentionOps.softmaxBackwardRow(a, g, dp, len, scale, lanes);
                            rows.put(i * t, dp, 0, t);
                        }
                        // dq rows = dpreatt rows · k over the keys they see
                        OpenBlas.sgemm(false, false, r1 - r0, d, r1, 1f, scratch.position((long) r0 * t), t,
                                k.row(b, j, 0), k.ld, 0f, dq.row(b, h, r0), dq.ld);
                    }
                    for (int c0 = 0; c0 < t; c0 += ROWS) {
                        int c1 = Math.min(t, c0 + ROWS);   // keys [c0, c1) are seen by rows [c0, T)
                        // dv_j (+)= att_hᵀ · dy_h ; dk_j (+)= dpreattᵀ · q_h, over the rows that see these keys
                        OpenBlas.sgemm(true, false, c1 - c0, d, t - c0, 1f, at(att, attAt + (long) c0 * t + c0), t,
                                dy.row(b, h, c0), dy.ld, beta, dv.row(b, j, c0), dv.ld);
                        OpenBlas.sgemm(true, false, c1 - c0, d, t - c0, 1f, scratch.position((long) c0 * t + c0), t,
                                q.row(b, h, c0), q.ld, beta, dk.row(b, j, c0), dk.ld);
                    }
                }
            }
        });
    }

    /** fp32 pointer to element {@code index} of t. */
    private static FloatPointer at(Tensor t, long index) {
        return new FloatPointer(CpuStorage.of(t).pointer()).position(t.offset() + index);
    }

    /** This thread's scratch with room for {@code floats} elements, positioned at 0. */
    private static FloatPointer scratch(long floats) {
        FloatPointer[] held = SCRATCH.get();
        FloatPointer p = held[0];
        if (p == null || p.capacity() < floats) {
            if (p != null) {
                p.close();
            }
            p = new FloatPointer(Math.max(1, floats));
            held[0] = p;
        }
        return p.position(0);
    }
}
