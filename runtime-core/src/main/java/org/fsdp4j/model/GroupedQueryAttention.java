// Llama's self-attention: q, k and v projections without biases (k and v narrower than q when
// key/value heads are shared: grouped-query attention), written side by side into one fused
// (B, T, (H + 2·Hkv)·D) buffer so one split moves every head into the head-major layout; rotary
// embeddings turn q and k in place; CausalAttention computes softmax(q·kᵀ/√D)·v with each group
// of query heads reading its key/value head directly; heads merged, then the output projection.
// The attention is the backend's (Ops.causalAttentionForward/Backward, fused on the CPU with the
// key/value groups), the op the GPT's packed causalSelfAttention reaches too; the Llama takes the
// head-major entry because rotary turns q and k between the projection and the attention.
package org.fsdp4j.model;

import org.fsdp4j.api.Linear;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class GroupedQueryAttention {

    /** What the backward needs besides the input. */
    static final class Saved implements AutoCloseable {
        final Tensor q;     // (B, H, T, D), rotated
        final Tensor k;     // (B, Hkv, T, D), rotated
        final Tensor v;     // (B, Hkv, T, D)
        final Tensor att;   // softmax probabilities, in the backend's layout (Ops.causalAttentionSavedShape)
        final Tensor y;     // (B, T, C) heads merged, input of the output projection

        private Saved(Tensor q, Tensor k, Tensor v, Tensor att, Tensor y) {
            this.q = q;
            this.k = k;
            this.v = v;
            this.att = att;
            this.y = y;
        }

        @Override
        public void close() {
            Buffers.close(q, k, v, att, y);
        }
    }

    private final int embedDim;
    private final int numHeads;
    private final int numKvHeads;
    private final int headDim;
    private final int qkvWidth;      // (H + 2·Hkv)·D
    private final float scale;
    private final Linear output;

    GroupedQueryAttention(LlamaConfig cfg) {
        this.embedDim = cfg.embedDim();
        this.numHeads = cfg.numHeads();
        this.numKvHeads = cfg.numKvHeads();
        this.headDim = cfg.headDim();
        this.qkvWidth = embedDim + 2 * cfg.kvDim();
        this.scale = (float) (1.0 / Math.sqrt(headDim));
        this.output = new Linear(embedDim, embedDim);
    }

    /** out (B, T, C) = attention of inp (B, T, C), positions turned by the rotary tables. */
    Saved forward(Ops backend, Tensor inp, Tensor wq, Tensor wk, Tensor wv, Tensor wo, RotaryTables.Upload rope,
                  Tensor out) {
        long b = inp.dim(0);
        int t = Math.toIntExact(inp.dim(1));
        Tensor qkv = Buffers.activation(backend, inp.dtype(), b, t, qkvWidth);             // (B, T, (H + 2Hkv)·D), forward only
        Tensor[] weights = {wq, wk, wv};
        for (int part = 0; part < 3; part++) {
            project(backend, inp, weights[part], qkv, part);
        }
        Tensor q = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);      // (B, H, T, D)
        Tensor k = Buffers.activation(backend, inp.dtype(), b, numKvHeads, t, headDim);    // (B, Hkv, T, D)
        Tensor v = Buffers.activation(backend, inp.dtype(), b, numKvHeads, t, headDim);    // (B, Hkv, T, D)
        backend.splitHeads(qkv, q, k, v, numHeads);
        qkv.close();
        backend.ropeForward(q, rope.cos(), rope.sin(), q);
        backend.ropeForward(k, rope.cos(), rope.sin(), k);

        CausalAttention.Output o = CausalAttention.forward(backend, q, k, v, scale);
        Tensor y = Buffers.activation(backend, inp.dtype(), b, t, embedDim);               // (B, T, C)
        backend.mergeHeads(o.yHeads(), y);
        o.yHeads().close();
        output.forward(backend, y, wo, null, out);
        return new Saved(q, k, v, o.att(), y);
    }

    /**
     * out (1, Tn, C) = attention of inp (1, Tn, C) at positions start .. start + Tn − 1 (rope: those
     * positions' tables) over layer {@code layer}'s KV cache, which it extends with the rotated keys.
     */
    void decode(Ops backend, Tensor inp, Tensor wq, Tensor wk, Tensor wv, Tensor wo, RotaryTables.Upload rope,
                KvCache cache, int layer, int start, Tensor out) {
        long b = inp.dim(0);
        int t = Math.toIntExact(inp.dim(1));
        Tensor qkv = Buffers.activation(backend, inp.dtype(), b, t, qkvWidth);             // (1, Tn, (H + 2Hkv)·D)
        Tensor q = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);      // (1, H, Tn, D)
        Tensor k = Buffers.activation(backend, inp.dtype(), b, numKvHeads, t, headDim);    // (1, Hkv, Tn, D)
        Tensor v = Buffers.activation(backend, inp.dtype(), b, numKvHeads, t, headDim);    // (1, Hkv, Tn, D)
        Tensor yHeads = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim); // (1, H, Tn, D)
        Tensor y = Buffers.activation(backend, inp.dtype(), b, t, embedDim);               // (1, Tn, C)
        try {
            Tensor[] weights = {wq, wk, wv};
            for (int part = 0; part < 3; part++) {
                project(backend, inp, weights[part], qkv, part);
            }
            backend.splitHeads(qkv, q, k, v, numHeads);
            backend.ropeForward(q, rope.cos(), rope.sin(), q);
            backend.ropeForward(k, rope.cos(), rope.sin(), k);
            cache.attend(backend, layer, q, k, v, start, scale, yHeads);
            backend.mergeHeads(yHeads, y);
            output.forward(backend, y, wo, null, out);
        } finally {
            Buffers.close(qkv, q, k, v, yHeads, y);
        }
    }

    /**
     * dinp (B, T, C) = the input's gradient (overwritten, not accumulated), and the four weight
     * gradients accumulated, from dout (B, T, C); inp is the forward's input.
     */
    void backward(Ops backend, Saved saved, Tensor inp, Tensor dout, Tensor dinp, Tensor wq, Tensor wk, Tensor wv,
                  Tensor wo, Tensor dwq, Tensor dwk, Tensor dwv, Tensor dwo, RotaryTables.Upload rope) {
        long b = inp.dim(0);
        int t = Math.toIntExact(inp.dim(1));
        Tensor dy = Buffers.activation(backend, inp.dtype(), b, t, embedDim);                  // (B, T, C)
        output.backward(backend, dout, saved.y, wo, dy, false, dwo, null);
        Tensor dyHeads = Buffers.zeroedActivation(backend, inp.dtype(), b, numHeads, t, headDim); // (B, H, T, D)
        backend.mergeHeadsBackward(dy, dyHeads);
        dy.close();

        CausalAttention.Grads g = CausalAttention.backward(backend, saved.q, saved.k, saved.v, saved.att, dyHeads, scale);
        backend.ropeBackward(g.dq(), rope.cos(), rope.sin(), g.dq());   // back to the unrotated q and k, in place
        backend.ropeBackward(g.dk(), rope.cos(), rope.sin(), g.dk());
        Tensor dqkv = Buffers.zeroedActivation(backend, inp.dtype(), b, t, qkvWidth);         // (B, T, (H + 2Hkv)·D)
        backend.splitHeadsBackward(g.dq(), g.dk(), g.dv(), dqkv, numHeads);
        g.close();
        Tensor[] weights = {wq, wk, wv};
        Tensor[] grads = {dwq, dwk, dwv};
        for (int part = 0; part < 3; part++) {
            projectBackward(backend, dqkv, part, inp, weights[part], grads[part], dinp, part > 0);
        }
        dqkv.close();
    }

    /** Columns [start, start + width) of qkv's rows (row stride qkvWidth): part 0 q, 1 k, 2 v. */
    private int start(int part) {
        return part == 0 ? 0 : embedDim + (part - 1) * numKvHeads * headDim;
    }

    private int width(int part) {
        return part == 0 ? embedDim : numKvHeads * headDim;
    }

    /** The part's columns of a (rows, qkvWidth) buffer, as the flat span a GEMM with ld = qkvWidth reads or writes. */
    private Tensor columns(Tensor qkv, int part, int rows) {
        return qkv.view(start(part), (long) (rows - 1) * qkvWidth + width(part));
    }

    /** qkv[:, part's columns] = inp (N, C) · weightᵀ (weight (width, C)). */
    private void project(Ops backend, Tensor inp, Tensor weight, Tensor qkv, int part) {
        int rows = Math.toIntExact(inp.numel() / embedDim);
        int n = width(part);
        Buffers.requireShape(weight, "attention projection weight", n, embedDim);
        backend.gemm(false, true, rows, n, embedDim, 1f, inp, embedDim, 0, weight, embedDim, 0,
                0f, columns(qkv, part, rows), qkvWidth, 0, 1);
    }

    /** dinp (N, C) (+)= dqkv[:, part] · weight; dweight (width, C) += dqkv[:, part]ᵀ · inp. */
    private void projectBackward(Ops backend, Tensor dqkv, int part, Tensor inp, Tensor weight, Tensor dweight,
                                 Tensor dinp, boolean accumulateDinp) {
        int rows = Math.toIntExact(inp.numel() / embedDim);
        int n = width(part);
        Buffers.requireShape(dweight, "attention projection gradient", n, embedDim);
        Buffers.requireShape(dinp, "attention dinp", inp.shape());
        Tensor d = columns(dqkv, part, rows);
        backend.gemm(false, false, rows, embedDim, n, 1f, d, qkvWidth, 0, weight, embedDim, 0,
                accumulateDinp ? 1f : 0f, dinp, embedDim, 0, 1);
        backend.gemm(true, false, n, embedDim, rows, 1f, d, qkvWidth, 0, inp, embedDim, 0, 1f, dweight, embedDim, 0, 1);
    }
}
