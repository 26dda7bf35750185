// Causal attention from the general ops: what Ops.causalAttentionForward/Backward do on a backend
// that does not fuse them (Backend's defaults; the CUDA backend today). Batched GEMMs over head-major q (B, H, T, D)
// and k, v (B, Hkv, T, D), Hkv dividing H. Grouped-query attention costs no copies: query heads
// g·j .. g·j + g − 1 (g = H / Hkv) share key/value head j (Hugging Face's repeat_kv order), and
// their q rows lie end to end in memory, so each (batch, key/value head) is one GEMM with g·T rows,
// the batch of B·Hkv GEMMs strided. The GEMMs with k = g·T rows (dk, dv) sum the group's
// contributions. With Hkv = H (GPT-2) they are the per-head GEMMs of multi-head attention.
package org.fsdp4j.backend;

import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class CompositeAttention {

    private CompositeAttention() {
    }

    static void forward(Ops ops, Tensor q, Tensor k, Tensor v, float scale, Tensor att, Tensor yHeads) {
        Shapes.AttentionSizes s = Shapes.attention("causalAttentionForward", q, k, v, att, new Tensor[] {yHeads});
        int t = s.t();
        int d = s.d();
        int gt = s.group() * t;
        int gemms = s.b() * s.kv();   // one per (batch, key/value head)
        try (Tensor preatt = ops.allocate(q.dtype(), MemoryCategory.ACTIVATIONS, s.b(), s.h(), t, t)) {   // (B, H, T, T)
            // preatt = q · kᵀ per head; the softmax ignores the upper triangle (causal mask)
            ops.gemm(false, true, gt, t, d, 1f, q, d, (long) gt * d, k, d, (long) t * d,
                    0f, preatt, t, (long) gt * t, gemms);
            int bh = s.b() * s.h();
            ops.causalSoftmaxForward(preatt.reshape(bh, t, t), att.reshape(bh, t, t), scale);
        }
        // yHeads = att · v per head
        ops.gemm(false, false, gt, d, t, 1f, att, t, (long) gt * t, v, d, (long) t * d,
                0f, yHeads, d, (long) gt * d, gemms);
    }

    static void backward(Ops ops, Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale, Tensor dq,
                         Tensor dk, Tensor dv) {
        Shapes.AttentionSizes s = Shapes.attention("causalAttentionBackward", q, k, v, att, new Tensor[] {dyHeads, dq},
                dk, dv);
        int t = s.t();
        int d = s.d();
        int gt = s.group() * t;
        int gemms = s.b() * s.kv();   // one per (batch, key/value head)
        long qStride = (long) gt * d;
        long kvStride = (long) t * d;
        long attStride = (long) gt * t;
        int bh = s.b() * s.h();
        try (Tensor dpreatt = ops.zeros(q.dtype(), MemoryCategory.ACTIVATIONS, s.b(), s.h(), t, t)) {   // (B, H, T, T)
            // a fresh buffer written by a GEMM with beta = 0: no zero-fill needed
            try (Tensor datt = ops.allocate(q.dtype(), MemoryCategory.ACTIVATIONS, s.b(), s.h(), t, t)) {   // (B, H, T, T)
                // datt = dyHeads · vᵀ ; dv = attᵀ · dyHeads (summed over the group's heads)
                ops.gemm(false, true, gt, t, d, 1f, dyHeads, d, qStride, v, d, kvStride, 0f, datt, t, attStride,
                        gemms);
                ops.gemm(true, false, t, d, gt, 1f, att, t, attStride, dyHeads, d, qStride, 0f, dv, d, kvStride,
                        gemms);
                ops.causalSoftmaxBackward(att.reshape(bh, t, t), datt.reshape(bh, t, t), dpreatt.reshape(bh, t, t),
                        scale);
            }
            // dq = dpreatt · k ; dk = dpreattᵀ · q (summed over the group's heads)
            ops.gemm(false, false, gt, d, t, 1f, dpreatt, t, attStride, k, d, kvStride, 0f, dq, d, qStride,
                    gemms);
            ops.gemm(true, false, t, d, gt, 1f, dpreatt, t, attStride, q, d, qStride, 0f, dk, d, kvStride,
                    gemms);
        }
    }

    static void packedForward(Ops ops, Tensor qkv, int numHeads, int numKvHeads, float scale, Tensor att, Tensor y) {
        int d = Shapes.selfAttention("causalSelfAttentionForward", qkv, numHeads, numKvHeads, att, y).d();
        long b = qkv.dim(0);
        long t = qkv.dim(1);
        try (Tensor q = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numHeads, t, d);      // (B, H, T, D)
             Tensor k = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numKvHeads, t, d);    // (B, Hkv, T, D)
             Tensor v = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numKvHeads, t, d);    // (B, Hkv, T, D)
             Tensor yHeads = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numHeads, t, d)) { // (B, H, T, D)
            ops.splitHeads(qkv, q, k, v, numHeads);
            ops.causalAttentionForward(q, k, v, scale, att, yHeads);
            ops.mergeHeads(yHeads, y);
        }
    }

    static void packedBackward(Ops ops, Tensor qkv, Tensor att, Tensor dy, int numHeads, int numKvHeads, float scale,
                               Tensor dqkv) {
        int d = Shapes.selfAttention("causalSelfAttentionBackward", qkv, numHeads, numKvHeads, att, dy, dqkv).d();
        long b = qkv.dim(0);
        long t = qkv.dim(1);
        try (Tensor q = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numHeads, t, d);      // (B, H, T, D)
             Tensor k = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numKvHeads, t, d);    // (B, Hkv, T, D)
             Tensor v = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numKvHeads, t, d);    // (B, Hkv, T, D)
             Tensor dyHeads = ops.zeros(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numHeads, t, d);   // (B, H, T, D)
             Tensor dq = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numHeads, t, d);     // (B, H, T, D)
             Tensor dk = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numKvHeads, t, d);   // (B, Hkv, T, D)
             Tensor dv = ops.allocate(qkv.dtype(), MemoryCategory.ACTIVATIONS, b, numKvHeads, t, d)) { // (B, Hkv, T, D)
            ops.splitHeads(qkv, q, k, v, numHeads);
            ops.mergeHeadsBackward(dy, dyHeads);
            ops.causalAttentionBackward(q, k, v, att, dyHeads, scale, dq, dk, dv);
            ops.fill(dqkv, 0f);
            ops.splitHeadsBackward(dq, dk, dv, dqkv, numHeads);
        }
    }
}
