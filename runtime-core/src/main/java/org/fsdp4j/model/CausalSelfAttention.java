// Multi-head causal self-attention as GPT-2 does it: one qkv Linear, heads split out,
// softmax(q·kᵀ/√hs) with a causal mask, att·v (CausalAttention: strided-batched GEMMs over the
// B·H heads), heads merged, an output projection.
package org.fsdp4j.model;

import org.fsdp4j.api.Linear;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class CausalSelfAttention {

    /** What the backward needs besides the input. */
    static final class Saved implements AutoCloseable {
        final Tensor q;     // (B, H, T, hs)
        final Tensor k;     // (B, H, T, hs)
        final Tensor v;     // (B, H, T, hs)
        final Tensor att;   // (B, H, T, T) softmax probabilities, zero above the diagonal
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
        Tensor qkvOut = Buffers.activation(backend, inp.dtype(), b, t, 3L * embedDim);          // (B, T, 3C), forward only
        qkv.forward(backend, inp, qkvWeight, qkvBias, qkvOut);
        Tensor q = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);           // (B, H, T, hs)
        Tensor k = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);           // (B, H, T, hs)
        Tensor v = Buffers.activation(backend, inp.dtype(), b, numHeads, t, headDim);           // (B, H, T, hs)
        backend.splitHeads(qkvOut, q, k, v, numHeads);
        qkvOut.close();

        CausalAttention.Output o = CausalAttention.forward(backend, q, k, v, scale);
        Tensor att = o.att();                                                                   // (B, H, T, T)
        Tensor yHeads = o.yHeads();                                                             // (B, H, T, hs), forward only
        Tensor y = Buffers.activation(backend, inp.dtype(), b, t, embedDim);                    // (B, T, C)
        backend.mergeHeads(yHeads, y);
        yHeads.close();
        proj.forward(backend, y, projWeight, projBias, out);
        return new Saved(q, k, v, att, y);
    }

    /**
     * Accumulates dinp (B, T, C) and the four parameter gradients from dout (B, T, C); inp is the
     * forward's input (needed for the qkv weight gradient).
     */
    void backward(Ops backend, Saved saved, Tensor inp, Tensor dout, Tensor dinp, Tensor qkvWeight,
                  Tensor projWeight, Tensor dqkvWeight, Tensor dqkvBias, Tensor dprojWeight, Tensor dprojBias) {
        long b = inp.dim(0);
        int t = Math.toIntExact(inp.dim(1));

        Tensor dy = Buffers.activation(backend, inp.dtype(), b, t, embedDim);                  // (B, T, C)
        proj.backward(backend, dout, saved.y, projWeight, dy, false, dprojWeight, dprojBias);
        Tensor dyHeads = Buffers.zeroedActivation(backend, inp.dtype(), b, numHeads, t, headDim); // (B, H, T, hs)
        backend.mergeHeadsBackward(dy, dyHeads);
        dy.close();

        CausalAttention.Grads g = CausalAttention.backward(backend, saved.q, saved.k, saved.v, saved.att, dyHeads, scale);
        Tensor dqkv = Buffers.zeroedActivation(backend, inp.dtype(), b, t, 3L * embedDim);      // (B, T, 3C)
        backend.splitHeadsBackward(g.dq(), g.dk(), g.dv(), dqkv, numHeads);
        g.close();
        qkv.backward(backend, dqkv, inp, qkvWeight, dinp, true, dqkvWeight, dqkvBias);
        dqkv.close();
    }
}
