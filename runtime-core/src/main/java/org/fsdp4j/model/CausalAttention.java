// The attention both families share, between their head splits and merges: the buffers of
// softmax(scale·q·kᵀ) with a causal mask, then ·v, over head-major q (B, H, T, D) and k, v
// (B, Hkv, T, D), Hkv dividing H; the math is the backend's (Ops.causalAttentionForward and
// Backward: batched GEMMs and the causal softmax by default, fused per head on the CPU).
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class CausalAttention {

    /** The forward's outputs: the probabilities the backward needs, and the heads' outputs. */
    record Output(Tensor att, Tensor yHeads) {   // Ops.causalAttentionSavedShape; (B, H, T, D)
    }

    /** The backward's outputs, each written (not accumulated) into a fresh buffer. */
    record Grads(Tensor dq, Tensor dk, Tensor dv) implements AutoCloseable {   // (B, H, T, D); (B, Hkv, T, D) each
        @Override
        public void close() {
            Buffers.close(dq, dk, dv);
        }
    }

    private CausalAttention() {
    }

    /** att and yHeads from q, k, v; the caller frees both (att after the backward). */
    static Output forward(Ops backend, Tensor q, Tensor k, Tensor v, float scale) {
        long b = q.dim(0);
        long h = q.dim(1);
        long t = q.dim(2);
        Tensor att = Buffers.activation(backend, q.dtype(), backend.causalAttentionSavedShape(q.dtype(), b, h, t));
        Tensor yHeads = Buffers.activation(backend, q.dtype(), b, h, t, q.dim(3));  // (B, H, T, D)
        backend.causalAttentionForward(q, k, v, scale, att, yHeads);
        return new Output(att, yHeads);
    }

    /** dq, dk, dv from dyHeads (B, H, T, D), which this frees once read; the caller frees the grads. */
    static Grads backward(Ops backend, Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale) {
        Tensor dq = Buffers.activation(backend, q.dtype(), q.shape());   // (B, H, T, D)
        Tensor dk = Buffers.activation(backend, k.dtype(), k.shape());   // (B, Hkv, T, D)
        Tensor dv = Buffers.activation(backend, v.dtype(), v.shape());   // (B, Hkv, T, D)
        backend.causalAttentionBackward(q, k, v, att, dyHeads, scale, dq, dk, dv);
        dyHeads.close();
        return new Grads(dq, dk, dv);
    }
}
