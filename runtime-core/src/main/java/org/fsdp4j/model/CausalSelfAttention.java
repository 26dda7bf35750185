// Multi-head causal self-attention as GPT-2 does it: one qkv Linear, softmax(q·kᵀ/√hs) with a
// causal mask and att·v over the heads of the fused projection, heads merged, an output projection.
// The attention is the backend's (Ops.causalSelfAttentionForward/Backward: split, attend, merge by
// default; read and written in place on the CPU).
package org.fsdp4j.model;

import org.fsdp4j.api.Linear;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class CausalSelfAttention {

    /** What the backward needs besides the input. */
    static final class Saved implements AutoCloseable {
        final Tensor qkv;   // (B, T, 3C) the fused projection: q, k, v of every head side by side
        final Tensor att;   // softmax probabilities, in the backend's layout (Ops.causalAttentionSavedShape)
        final Tensor y;     // (B, T, C) heads merged, input of the output projection

        private Saved(Tensor qkv, Tensor att, Tensor y) {
            this.qkv = qkv;
            this.att = att;
            this.y = y;
        }

        @Override
        public void close() {
            Buffers.close(qkv, att, y);
        }
    }

    private final int embedDim;
    private final int numHeads;
    private final int headDim;
    private final float scale;
    private final Linear qkv;
    private final Linear proj;

    CausalSelfAttention(int embedDim, int numHeads) {
        this.embedDim = embedDim;
        this.numHeads = numHeads;
        this.headDim = embedDim / numHeads;
        this.scale = (float) (1.0 / Math.sqrt(headDim));
        this.qkv = new Linear(embedDim, 3 * embedDim);
        this.proj = new Linear(embedDim, embedDim);
    }

    /** out (B, T, C) = attention of inp (B, T, C). */
    Saved forward(Ops backend, Tensor inp, Tensor qkvWeight, Tensor qkvBias, Tensor projWeight, Tensor projBias,
                  Tensor out) {
        long b = inp.dim(0);
        int t = Math.toIntExact(inp.dim(1));
        Tensor qkvOut = Buffers.activation(backend, inp.dtype(), b, t, 3L * embedDim);          // (B, T, 3C)
        qkv.forward(backend, inp, qkvWeight, qkvBias, qkvOut);
        Tensor att = Buffers.activation(backend, inp.dtype(),                                   // the backend's layout
                backend.causalAttentionSavedShape(inp.dtype(), b, numHeads, t));
        Tensor y = Buffers.activation(backend, inp.dtype(), b, t, embedDim);                    // (B, T, C)
        backend.causalSelfAttentionForward(qkvOut, numHeads, numHeads, scale, att, y);
        proj.forward(backend, y, projWeight, projBias, out);
        return new Saved(qkvOut, att, y);
    }

    /**
     * out (1, Tn, C) = attention of inp (1, Tn, C) at positions start .. start + Tn − 1 over the
     * KV cache's earlier positions of layer {@code layer}, whose keys and values it extends.
     */
    void decode(Ops backend, Tensor inp, Tensor qkvWeight, Tensor qkvBias, Tensor projWeight, Tensor projBias,
                KvCache cache, int layer, int start, Tensor out) {
        long b = inp.dim(0);
        long t = inp.dim(1);
        Tensor qkvOut = Buffers.activation(backend, inp.dtype(), b, t, 3L * embedDim);          // (1, Tn, 3C)
        Tensor q = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);           // (1, H, Tn, D)
        Tensor k = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);           // (1, H, Tn, D)
        Tensor v = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);           // (1, H, Tn, D)
        Tensor yHeads = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);      // (1, H, Tn, D)
        Tensor y = Buffers.activation(backend, inp.dtype(), b, t, embedDim);                    // (1, Tn, C)
        try {
            qkv.forward(backend, inp, qkvWeight, qkvBias, qkvOut);
            backend.splitHeads(qkvOut, q, k, v, numHeads);
            cache.attend(backend, layer, q, k, v, start, scale, yHeads);
            backend.mergeHeads(yHeads, y);
            proj.forward(backend, y, projWeight, projBias, out);
        } finally {
            Buffers.close(qkvOut, q, k, v, yHeads, y);
        }
    }

    /**
     * dinp (B, T, C) = the input's gradient (overwritten, so a fresh buffer needs no zero-fill), and
     * the four parameter gradients accumulated, from dout (B, T, C); inp is the forward's input
     * (needed for the qkv weight gradient).
     */
    void backward(Ops backend, Saved saved, Tensor inp, Tensor dout, Tensor dinp, Tensor qkvWeight,
                  Tensor projWeight, Tensor dqkvWeight, Tensor dqkvBias, Tensor dprojWeight, Tensor dprojBias) {
        long b = inp.dim(0);
        int t = Math.toIntExact(inp.dim(1));
        Tensor dy = Buffers.activation(backend, inp.dtype(), b, t, embedDim);                  // (B, T, C)
        proj.backward(backend, dout, saved.y, projWeight, dy, false, dprojWeight, dprojBias);
        Tensor dqkv = Buffers.activation(backend, inp.dtype(), b, t, 3L * embedDim);           // (B, T, 3C), overwritten
        backend.causalSelfAttentionBackward(saved.qkv, saved.att, dy, numHeads, numHeads, scale, dqkv);
        dy.close();
        qkv.backward(backend, dqkv, inp, qkvWeight, dinp, false, dqkvWeight, dqkvBias);
        dqkv.close();
    }
}
