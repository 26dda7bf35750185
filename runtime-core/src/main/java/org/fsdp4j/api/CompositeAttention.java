// Causal attention from the general ops: what Ops.causalAttentionForward/Backward do on a backend
// that does not fuse them (the CUDA backend today). Batched GEMMs over head-major q (B, H, T, D)
// and k, v (B, Hkv, T, D), Hkv dividing H. Grouped-query attention costs no copies: query heads
// g·j .. g·j + g − 1 (g = H / Hkv) share key/value head j (Hugging Face's repeat_kv order), and
// their q rows lie end to end in memory, so each (batch, key/value head) is one GEMM with g·T rows,
// the batch of B·Hkv GEMMs strided. The GEMMs with k = g·T rows (dk, dv) sum the group's
// contributions. With Hkv = H (GPT-2) they are the per-head GEMMs of multi-head attention.
package org.fsdp4j.api;

final class CompositeAttention {

    /** The sizes of one call: batch, heads, key/value heads, sequence, head size. */
    record Sizes(long b, int h, int kv, int t, int d) {
        int group() {
            return h / kv;
        }

        /** One GEMM per (batch, key/value head). */
        int gemms() {
            return Math.toIntExact(b * kv);
        }
    }

    private CompositeAttention() {
    }

    /** The sizes of q, k, v, checked against each other and against the outputs' shapes. */
    static Sizes sizes(Tensor q, Tensor k, Tensor v, Tensor att, Tensor yOrDq) {
        if (q.rank() != 4) {
            throw new IllegalArgumentException("attention q must be (B, H, T, D), got " + q);
        }
        Sizes s = new Sizes(q.dim(0), Math.toIntExact(q.dim(1)), Math.toIntExact(k.dim(1)), Math.toIntExact(q.dim(2)),
                Math.toIntExact(q.dim(3)));
        Tensor.requireShape(k, "attention k", s.b, s.kv, s.t, s.d);
        Tensor.requireShape(v, "attention v", s.b, s.kv, s.t, s.d);
        Tensor.requireShape(att, "attention att", s.b, s.h, s.t, s.t);
        Tensor.requireShape(yOrDq, "attention output", s.b, s.h, s.t, s.d);
        if (s.kv < 1 || s.h % s.kv != 0) {
            throw new IllegalArgumentException("attention: " + s.kv + " key/value heads do not divide " + s.h + " heads");
        }
        return s;
    }

    static void forward(Ops ops, Tensor q, Tensor k, Tensor v, float scale, Tensor att, Tensor yHeads) {
        Sizes s = sizes(q, k, v, att, yHeads);
        int t = s.t;
        int gt = s.group() * t;
        try (Tensor preatt = ops.allocate(q.dtype(), MemoryCategory.ACTIVATIONS, s.b, s.h, t, t)) {   // (B, H, T, T)
            // preatt = q · kᵀ per head; the softmax ignores the upper triangle (causal mask)
            ops.gemm(false, true, gt, t, s.d, 1f, q, s.d, (long) gt * s.d, k, s.d, (long) t * s.d,
                    0f, preatt, t, (long) gt * t, s.gemms());
            int bh = Math.toIntExact(s.b * s.h);
            ops.causalSoftmaxForward(preatt.reshape(bh, t, t), att.reshape(bh, t, t), scale);
        }
        // yHeads = att · v per head
        ops.gemm(false, false, gt, s.d, t, 1f, att, t, (long) gt * t, v, s.d, (long) t * s.d,
                0f, yHeads, s.d, (long) gt * s.d, s.gemms());
    }

    static void backward(Ops ops, Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale, Tensor dq,
                         Tensor dk, Tensor dv) {
        Sizes s = sizes(q, k, v, att, dq);
        Tensor.requireShape(dyHeads, "attention dyHeads", s.b, s.h, s.t, s.d);
        Tensor.requireShape(dk, "attention dk", s.b, s.kv, s.t, s.d);
        Tensor.requireShape(dv, "attention dv", s.b, s.kv, s.t, s.d);
        int t = s.t;
        int gt = s.group() * t;
        long qStride = (long) gt * s.d;
        long kvStride = (long) t * s.d;
        long attStride = (long) gt * t;
        int bh = Math.toIntExact(s.b * s.h);
        try (Tensor dpreatt = ops.zeros(q.dtype(), MemoryCategory.ACTIVATIONS, s.b, s.h, t, t)) {   // (B, H, T, T)
            // a fresh buffer written by a GEMM with beta = 0: no zero-fill needed
            try (Tensor datt = ops.allocate(q.dtype(), MemoryCategory.ACTIVATIONS, s.b, s.h, t, t)) {   // (B, H, T, T)
                // datt = dyHeads · vᵀ ; dv = attᵀ · dyHeads (summed over the group's heads)
                ops.gemm(false, true, gt, t, s.d, 1f, dyHeads, s.d, qStride, v, s.d, kvStride, 0f, datt, t, attStride,
                        s.gemms());
                ops.gemm(true, false, t, s.d, gt, 1f, att, t, attStride, dyHeads, s.d, qStride, 0f, dv, s.d, kvStride,
                        s.gemms());
                ops.causalSoftmaxBackward(att.reshape(bh, t, t), datt.reshape(bh, t, t), dpreatt.reshape(bh, t, t),
                        scale);
            }
            // dq = dpreatt · k ; dk = dpreattᵀ · q (summed over the group's heads)
            ops.gemm(false, false, gt, s.d, t, 1f, dpreatt, t, attStride, k, s.d, kvStride, 0f, dq, s.d, qStride,
                    s.gemms());
            ops.gemm(true, false, t, s.d, gt, 1f, dpreatt, t, attStride, q, s.d, qStride, 0f, dk, s.d, kvStride,
                    s.gemms());
        }
    }

    /** The head size D of a fused projection qkv (B, T, (H + 2·Hkv)·D), checked with att and y (B, T, H·D). */
    static int packedHeadSize(Tensor qkv, int numHeads, int numKvHeads, Tensor att, Tensor y) {
        if (qkv.rank() != 3 || numHeads < 1 || numKvHeads < 1 || numHeads % numKvHeads != 0
                || qkv.dim(2) % (numHeads + 2L * numKvHeads) != 0) {
            throw new IllegalArgumentException("causal self-attention: qkv " + qkv + " is not (B, T, (H + 2·Hkv)·D) for "
                    + numHeads + " heads and " + numKvHeads + " key/value heads (which must divide the heads)");
        }
        int d = Math.toIntExact(qkv.dim(2) / (numHeads + 2L * numKvHeads));
        Tensor.requireShape(att, "causal self-attention att", qkv.dim(0), numHeads, qkv.dim(1), qkv.dim(1));
        Tensor.requireShape(y, "causal self-attention output", qkv.dim(0), qkv.dim(1), (long) numHeads * d);
        return d;
    }

    static void packedForward(Ops ops, Tensor qkv, int numHeads, int numKvHeads, float scale, Tensor att, Tensor y) {
        int d = packedHeadSize(qkv, numHeads, numKvHeads, att, y);
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
        int d = packedHeadSize(qkv, numHeads, numKvHeads, att, dy);
        Tensor.requireShape(dqkv, "causal self-attention dqkv", qkv.shape());
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
