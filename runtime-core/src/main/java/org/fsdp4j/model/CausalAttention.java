// The attention both families share, between their head splits and merges: softmax(scale·q·kᵀ)
// with a causal mask, then ·v, over head-major q (B, H, T, D) and k, v (B, Hkv, T, D), Hkv dividing
// H. Grouped-query attention costs no copies: query heads g·j .. g·j + g − 1 (g = H / Hkv) share
// key/value head j (Hugging Face's repeat_kv order), and their q rows lie end to end in memory, so
// each (batch, key/value head) is one GEMM with g·T rows, the batch of B·Hkv GEMMs strided. The
// GEMMs with k = g·T rows (dk, dv) sum the group's contributions. With Hkv = H (GPT-2) they are
// the per-head GEMMs of multi-head attention.
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class CausalAttention {

    /** The forward's outputs: the probabilities the backward needs, and the heads' outputs. */
    record Output(Tensor att, Tensor yHeads) {   // (B, H, T, T), zero above the diagonal; (B, H, T, D)
    }

    /** The backward's outputs, each written (not accumulated) into a fresh buffer. */
    record Grads(Tensor dq, Tensor dk, Tensor dv) implements AutoCloseable {   // (B, H, T, D); (B, Hkv, T, D) each
        @Override
        public void close() {
            Buffers.close(dq, dk, dv);
        }
    }

    /** The sizes of one call: batch, heads, key/value heads, sequence, head size. */
    private record Sizes(long b, int h, int kv, int t, int d) {
        int group() {
            return h / kv;
        }

        /** One GEMM per (batch, key/value head). */
        int gemms() {
            return Math.toIntExact(b * kv);
        }
    }

    private CausalAttention() {
    }

    private static Sizes sizes(Tensor q, Tensor k, Tensor v) {
        Sizes s = new Sizes(q.dim(0), Math.toIntExact(q.dim(1)), Math.toIntExact(k.dim(1)), Math.toIntExact(q.dim(2)),
                Math.toIntExact(q.dim(3)));
        Buffers.requireShape(k, "attention k", s.b, s.kv, s.t, s.d);
        Buffers.requireShape(v, "attention v", s.b, s.kv, s.t, s.d);
        if (s.h % s.kv != 0) {
            throw new IllegalArgumentException("attention: " + s.kv + " key/value heads do not divide " + s.h + " heads");
        }
        return s;
    }

    /** att and yHeads from q, k, v; the caller frees both (att after the backward). */
    static Output forward(Ops backend, Tensor q, Tensor k, Tensor v, float scale) {
        Sizes s = sizes(q, k, v);
        int t = s.t;
        int gt = s.group() * t;
        Tensor preatt = Buffers.activation(backend, q.dtype(), s.b, s.h, t, t);   // (B, H, T, T), forward only
        Tensor att = Buffers.activation(backend, q.dtype(), s.b, s.h, t, t);      // (B, H, T, T)
        // preatt = q · kᵀ per head; the softmax ignores the upper triangle (causal mask)
        backend.gemm(false, true, gt, t, s.d, 1f, q, s.d, (long) gt * s.d, k, s.d, (long) t * s.d,
                0f, preatt, t, (long) gt * t, s.gemms());
        int bh = Math.toIntExact(s.b * s.h);
        backend.causalSoftmaxForward(preatt.reshape(bh, t, t), att.reshape(bh, t, t), scale);
        preatt.close();
        Tensor yHeads = Buffers.activation(backend, q.dtype(), s.b, s.h, t, s.d);  // (B, H, T, D)
        // yHeads = att · v per head
        backend.gemm(false, false, gt, s.d, t, 1f, att, t, (long) gt * t, v, s.d, (long) t * s.d,
                0f, yHeads, s.d, (long) gt * s.d, s.gemms());
        return new Output(att, yHeads);
    }

    /** dq, dk, dv from dyHeads (B, H, T, D), which this frees once read; the caller frees the grads. */
    static Grads backward(Ops backend, Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale) {
        Sizes s = sizes(q, k, v);
        int t = s.t;
        int gt = s.group() * t;
        long qStride = (long) gt * s.d;
        long kvStride = (long) t * s.d;
        long attStride = (long) gt * t;
        // fresh buffers written by a GEMM with beta = 0: no zero-fill needed
        Tensor datt = Buffers.activation(backend, q.dtype(), s.b, s.h, t, t);     // (B, H, T, T)
        Tensor dv = Buffers.activation(backend, q.dtype(), s.b, s.kv, t, s.d);    // (B, Hkv, T, D)
        // datt = dyHeads · vᵀ ; dv = attᵀ · dyHeads (summed over the group's heads)
        backend.gemm(false, true, gt, t, s.d, 1f, dyHeads, s.d, qStride, v, s.d, kvStride, 0f, datt, t, attStride,
                s.gemms());
        backend.gemm(true, false, t, s.d, gt, 1f, att, t, attStride, dyHeads, s.d, qStride, 0f, dv, s.d, kvStride,
                s.gemms());
        dyHeads.close();

        int bh = Math.toIntExact(s.b * s.h);
        Tensor dpreatt = Buffers.zeroedActivation(backend, q.dtype(), s.b, s.h, t, t);   // (B, H, T, T)
        backend.causalSoftmaxBackward(att.reshape(bh, t, t), datt.reshape(bh, t, t), dpreatt.reshape(bh, t, t), scale);
        datt.close();

        Tensor dq = Buffers.activation(backend, q.dtype(), s.b, s.h, t, s.d);     // (B, H, T, D)
        Tensor dk = Buffers.activation(backend, q.dtype(), s.b, s.kv, t, s.d);    // (B, Hkv, T, D)
        // dq = dpreatt · k ; dk = dpreattᵀ · q (summed over the group's heads)
        backend.gemm(false, false, gt, s.d, t, 1f, dpreatt, t, attStride, k, s.d, kvStride, 0f, dq, s.d, qStride,
                s.gemms());
        backend.gemm(true, false, t, s.d, gt, 1f, dpreatt, t, attStride, q, s.d, qStride, 0f, dk, s.d, kvStride,
                s.gemms());
        dpreatt.close();
        return new Grads(dq, dk, dv);
    }
}
