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
