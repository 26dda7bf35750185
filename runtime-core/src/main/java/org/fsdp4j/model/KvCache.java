// The keys and values of every position a decoder has seen so far, per layer, so that generating
// one more token runs the blocks over that token only and attends over the cached positions
// (DecoderModel.decode). Owned by the caller of decode, for one sequence (batch 1); its buffers are
// activations of the model's compute dtype on the model's device. Also where the attention over the
// cache is computed (attend), shared by both families: GEMMs over the cached prefix and the
// backend's causalSoftmaxFromForward.
package org.fsdp4j.model;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

public final class KvCache implements AutoCloseable {

    private final Tensor[] keys;     // [L] each (1, Hkv, Tmax, D): rows 0 .. length−1 hold positions 0 .. length−1
    private final Tensor[] values;   // [L] each (1, Hkv, Tmax, D)
    private final int kvHeads;
    private final int headDim;
    private final int capacity;
    private int length;

    KvCache(Ops backend, DType dtype, int layers, int kvHeads, int headDim, int capacity) {
        this.keys = new Tensor[layers];
        this.values = new Tensor[layers];
        this.kvHeads = kvHeads;
        this.headDim = headDim;
        this.capacity = capacity;
        try {
            for (int i = 0; i < layers; i++) {
                keys[i] = Buffers.activation(backend, dtype, 1, kvHeads, capacity, headDim);
                values[i] = Buffers.activation(backend, dtype, 1, kvHeads, capacity, headDim);
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /** Positions held: the next token decode runs sits at this position. */
    public int length() {
        return length;
    }

    /** The most positions it can hold (Tmax, at most the model's context). */
    public int capacity() {
        return capacity;
    }

    /** Forgets every position (the buffers are kept), to decode a new sequence. */
    public void clear() {
        length = 0;
    }

    void advance(int n) {
        length += n;
    }

    /**
     * yHeads (1, H, Tn, D) = causal attention of the Tn new queries q (1, H, Tn, D) at positions
     * start .. start + Tn − 1 over layer {@code layer}'s cached keys and values, after the new
     * keys k and values v (1, Hkv, Tn, D) are written at those positions. Query heads g·j .. g·j + g − 1
     * (g = H / Hkv) read key/value head j, as Ops.causalAttentionForward's grouping.
     */
    void attend(Ops backend, int layer, Tensor q, Tensor k, Tensor v, int start, float scale, Tensor yHeads) {
        int heads = Math.toIntExact(q.dim(1));
        int tn = Math.toIntExact(q.dim(2));
        int d = headDim;
        int g = heads / kvHeads;
        int l = start + tn;                                         // keys seen by the last query
        long headStride = (long) capacity * d;                      // elements between cached heads
        for (int j = 0; j < kvHeads; j++) {
            backend.copy(k.view((long) j * tn * d, (long) tn * d), keys[layer].view(j * headStride + (long) start * d, (long) tn * d));
            backend.copy(v.view((long) j * tn * d, (long) tn * d), values[layer].view(j * headStride + (long) start * d, (long) tn * d));
        }
        try (Tensor scores = Buffers.activation(backend, q.dtype(), heads, tn, l);   // (H, Tn, L) q·kᵀ, then the probabilities
             Tensor att = Buffers.activation(backend, q.dtype(), heads, tn, l)) {    // (H, Tn, L)
            // per key/value head j: its g query heads' Tn rows each (g·Tn, D) · cached keys (L, D)ᵀ
            backend.gemm(false, true, g * tn, l, d, 1f, q, d, (long) g * tn * d, keys[layer], d, headStride,
                    0f, scores, l, (long) g * tn * l, kvHeads);
            backend.causalSoftmaxFromForward(scores, start, scale, att);
            backend.gemm(false, false, g * tn, d, l, 1f, att, l, (long) g * tn * l, values[layer], d, headStride,
                    0f, yHeads, d, (long) g * tn * d, kvHeads);
        }
    }

    @Override
    public void close() {
        Buffers.close(keys);
        Buffers.close(values);
    }
}
