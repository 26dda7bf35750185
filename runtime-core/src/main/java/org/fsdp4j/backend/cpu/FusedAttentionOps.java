// Causal attention on fp32 CPU tensors, one (batch, key/value head) group at a time: each head's
// T×T scores are computed, softmaxed and used while they sit in the core's cache, instead of the
// composite's batched GEMMs and softmax, which stream every (B, H, T, T) buffer through memory
// four times in the forward and eight in the backward (bench/NOTES.md, 2.6: at T = 256 those
// passes cost more than the attention GEMMs' arithmetic). The backward needs no (B, H, T, T)
// buffer at all: datt and dpreatt share one T×T scratch per thread, a row of datt turned into
// the same row of dpreatt in place.
//
// Per group, its query heads in order (so dk and dv, summed over the group, add in a fixed order:
// the same bits for any thread count); every GEMM is one single-threaded OpenBLAS call, the same
// per-head calls the batched GEMMs make for multi-head attention, and the softmax rows are
// AttentionOps' row loops (the same bits as the composite's ops for Hkv = H).
package org.fsdp4j.backend.cpu;

import java.nio.FloatBuffer;
import java.util.Arrays;
import org.bytedeco.javacpp.FloatPointer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class FusedAttentionOps {

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

    /** Sizes: batch, heads, key/value heads, sequence, head size. */
    record Sizes(int b, int h, int kv, int t, int d) {
        static Sizes of(Tensor q, Tensor k) {
            return new Sizes(Math.toIntExact(q.dim(0)), Math.toIntExact(q.dim(1)), Math.toIntExact(k.dim(1)),
                    Math.toIntExact(q.dim(2)), Math.toIntExact(q.dim(3)));
        }

        /** Checks q (B, H, T, D), k and v (B, Hkv, T, D) with Hkv dividing H, att (B, H, T, T) and each head-shaped tensor. */
        static Sizes check(String op, Tensor q, Tensor k, Tensor v, Tensor att, Tensor[] qShaped, Tensor[] kvShaped) {
            if (q.rank() != 4 || k.rank() != 4) {
                throw new IllegalArgumentException(op + ": q and k must be (B, H, T, D), got " + q + " and " + k);
            }
            Sizes s = of(q, k);
            if (s.kv < 1 || s.h % s.kv != 0) {
                throw new IllegalArgumentException(op + ": " + s.kv + " key/value heads do not divide " + s.h + " heads");
            }
            Tensor.requireShape(k, op + " k", s.b, s.kv, s.t, s.d);
            Tensor.requireShape(v, op + " v", s.b, s.kv, s.t, s.d);
            Tensor.requireShape(att, op + " att", s.b, s.h, s.t, s.t);
            for (Tensor x : qShaped) {
                Tensor.requireShape(x, op + " (B, H, T, D) operand", s.b, s.h, s.t, s.d);
            }
            for (Tensor x : kvShaped) {
                Tensor.requireShape(x, op + " (B, Hkv, T, D) operand", s.b, s.kv, s.t, s.d);
            }
            return s;
        }

        int group() {
            return h / kv;
        }
    }

    static void forward(CpuThreads threads, Tensor q, Tensor k, Tensor v, float scale, Tensor att, Tensor yHeads) {
        Sizes s = Sizes.of(q, k);
        int t = s.t;
        int d = s.d;
        Elements ea = Elements.of(att);
        threads.forChunks((long) s.b * s.kv, 1, (chunk, from, to) -> {
            float[] row = Scratch.floats(0, t);
            double[] lanes = Simd.laneScratch();
            for (long grp = from; grp < to; grp++) {
                int b = (int) (grp / s.kv);
                int j = (int) (grp % s.kv);
                long kvAt = ((long) b * s.kv + j) * t * d;
                for (int hh = 0; hh < s.group(); hh++) {
                    long head = (long) b * s.h + (long) j * s.group() + hh;
                    long attAt = head * t * t;
                    // att_h = q_h · k_jᵀ (T×T), then its causal softmax row by row, in cache
                    OpenBlas.sgemm(false, true, t, t, d, 1f, at(q, head * t * d), d, at(k, kvAt), d,
                            0f, at(att, attAt), t);
                    for (int i = 0; i < t; i++) {
                        int len = i + 1;   // row i sees keys 0..i
                        ea.load(attAt + (long) i * t, row, 0, len);
                        AttentionOps.softmaxRow(row, len, scale, lanes);
                        Arrays.fill(row, len, t, 0f);
                        ea.store(row, 0, attAt + (long) i * t, t);
                    }
                    // y_h = att_h · v_j
                    OpenBlas.sgemm(false, false, t, d, t, 1f, at(att, attAt), t, at(v, kvAt), d,
                            0f, at(yHeads, head * t * d), d);
                }
            }
        });
    }

    static void backward(CpuThreads threads, Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale,
                         Tensor dq, Tensor dk, Tensor dv) {
        Sizes s = Sizes.of(q, k);
        int t = s.t;
        int d = s.d;
        Elements ea = Elements.of(att);
        threads.forChunks((long) s.b * s.kv, 1, (chunk, from, to) -> {
            float[] a = Scratch.floats(0, t);
            float[] g = Scratch.floats(1, t);
            float[] dp = Scratch.floats(2, t);
            double[] lanes = Simd.laneScratch();
            FloatPointer scratch = scratch((long) t * t);      // (T, T): datt, then dpreatt row by row
            FloatBuffer rows = scratch.asBuffer();
            for (long grp = from; grp < to; grp++) {
                int b = (int) (grp / s.kv);
                int j = (int) (grp % s.kv);
                long kvAt = ((long) b * s.kv + j) * t * d;
                for (int hh = 0; hh < s.group(); hh++) {
                    long head = (long) b * s.h + (long) j * s.group() + hh;
                    long attAt = head * t * t;
                    long qAt = head * t * d;
                    float beta = hh == 0 ? 0f : 1f;   // dk, dv sum over the group's heads
                    // datt = dy_h · v_jᵀ ; dv_j (+)= att_hᵀ · dy_h
                    OpenBlas.sgemm(false, true, t, t, d, 1f, at(dyHeads, qAt), d, at(v, kvAt), d, 0f, scratch, t);
                    OpenBlas.sgemm(true, false, t, d, t, 1f, at(att, attAt), t, at(dyHeads, qAt), d,
                            beta, at(dv, kvAt), d);
                    // dpreatt row i = scale · att · (datt − Σ att·datt) for j ≤ i, 0 above (the GEMMs read it whole)
                    for (int i = 0; i < t; i++) {
                        int len = i + 1;
                        ea.load(attAt + (long) i * t, a, 0, len);
                        rows.get(i * t, g, 0, len);
                        Arrays.fill(dp, 0, t, 0f);
                        AttentionOps.softmaxBackwardRow(a, g, dp, len, scale, lanes);
                        rows.put(i * t, dp, 0, t);
                    }
                    // dq_h = dpreatt · k_j ; dk_j (+)= dpreattᵀ · q_h
                    OpenBlas.sgemm(false, false, t, d, t, 1f, scratch, t, at(k, kvAt), d, 0f, at(dq, qAt), d);
                    OpenBlas.sgemm(true, false, t, d, t, 1f, scratch, t, at(q, qAt), d, beta, at(dk, kvAt), d);
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
