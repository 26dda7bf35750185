// The cosines and sines of the rotary position embedding (Su et al. 2021, in Hugging Face's
// LlamaRotaryEmbedding form): position t turns pair i of every head (dims i and i + D/2) by
// t · θ^(−2i/D). Computed once per model on the host in fp64 and rounded to fp32 (Hugging Face
// computes the angle t · inv_freq in fp32, which differs from these by about an ulp of the angle:
// 1e-6 rad at t = 16, 1e-4 at t = 2048), then uploaded for each forward's length T: two (T, D/2)
// F32 activations, 4·T·D bytes in all.
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class RotaryTables {

    /** The uploaded tables of one forward: what ropeForward and ropeBackward take. */
    record Upload(Tensor cos, Tensor sin) implements AutoCloseable {   // each (T, D/2) F32
        @Override
        public void close() {
            Buffers.close(cos, sin);
        }
    }

    private final int half;
    private final float[] cos;   // (maxT, D/2) row-major
    private final float[] sin;   // (maxT, D/2)

    RotaryTables(int maxSeqLen, int headDim, double theta) {
        this.half = headDim / 2;
        this.cos = new float[maxSeqLen * half];
        this.sin = new float[maxSeqLen * half];
        for (int i = 0; i < half; i++) {
            double invFreq = Math.pow(theta, -2.0 * i / headDim);
            for (int t = 0; t < maxSeqLen; t++) {
                double angle = t * invFreq;
                cos[t * half + i] = (float) Math.cos(angle);
                sin[t * half + i] = (float) Math.sin(angle);
            }
        }
    }

    /** The first {@code t} positions' tables on {@code backend}. */
    Upload upload(Ops backend, int t) {
        return upload(backend, 0, t);
    }

    /** The tables of positions start .. start + t − 1 on {@code backend}, row i for position start + i (decoding). */
    Upload upload(Ops backend, int start, int t) {
        Tensor c = Buffers.statistics(backend, t, half);
        Tensor s = Buffers.statistics(backend, t, half);
        backend.copyFromHost(cos, start * half, c);
        backend.copyFromHost(sin, start * half, s);
        return new Upload(c, s);
    }
}
