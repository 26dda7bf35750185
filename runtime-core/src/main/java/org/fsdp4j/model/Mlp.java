// The block's feed-forward part: Linear C→4C, GELU (tanh approximation, as GPT-2), Linear 4C→C.
package org.fsdp4j.model;

import org.fsdp4j.api.Linear;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class Mlp {

    /** What the backward needs besides the input. */
    record Saved(Tensor fcOut, Tensor geluOut) implements AutoCloseable {   // each (B, T, 4C)
        @Override
        public void close() {
            Buffers.close(fcOut, geluOut);
        }
    }

    private final int embedDim;
    private final Linear fc;
    private final Linear proj;

    Mlp(int embedDim) {
        this.embedDim = embedDim;
        this.fc = new Linear(embedDim, 4 * embedDim);
        this.proj = new Linear(4 * embedDim, embedDim);
    }

    /** out (B, T, C) = proj(GELU(fc(inp (B, T, C)))). */
    Saved forward(Ops backend, Tensor inp, Tensor fcWeight, Tensor fcBias, Tensor projWeight, Tensor projBias,
                  Tensor out) {
        Saved saved = hidden(backend, inp, fcWeight, fcBias);
        project(backend, saved, projWeight, projBias, out);
        return saved;
    }

    /** The first half, GELU(fc(inp)): all the backward needs (a recompute can stop here). */
    Saved hidden(Ops backend, Tensor inp, Tensor fcWeight, Tensor fcBias) {
        long b = inp.dim(0);
        long t = inp.dim(1);
        Tensor fcOut = Buffers.activation(backend, inp.dtype(), b, t, 4L * embedDim);     // (B, T, 4C)
        Tensor geluOut = Buffers.activation(backend, inp.dtype(), b, t, 4L * embedDim);   // (B, T, 4C)
        fc.forwardGelu(backend, inp, fcWeight, fcBias, fcOut, geluOut);
        return new Saved(fcOut, geluOut);
    }

    /** The second half: out (B, T, C) = proj(saved GELU output). */
    void project(Ops backend, Saved saved, Tensor projWeight, Tensor projBias, Tensor out) {
        proj.forward(backend, saved.geluOut(), projWeight, projBias, out);
    }

    /**
     * dinp (B, T, C) = the input's gradient (overwritten, so a fresh buffer needs no zero-fill), and
     * the four parameter gradients accumulated, from dout (B, T, C).
     */
    void backward(Ops backend, Saved saved, Tensor inp, Tensor dout, Tensor dinp, Tensor fcWeight,
                  Tensor projWeight, Tensor dfcWeight, Tensor dfcBias, Tensor dprojWeight, Tensor dprojBias) {
        long b = inp.dim(0);
        long t = inp.dim(1);
        Tensor dfc = Buffers.activation(backend, inp.dtype(), b, t, 4L * embedDim);           // (B, T, 4C), overwritten
        proj.backwardThroughGelu(backend, dout, saved.geluOut(), saved.fcOut(), projWeight, dfc, dprojWeight,
                dprojBias);
        fc.backward(backend, dfc, inp, fcWeight, dinp, false, dfcWeight, dfcBias);
        dfc.close();
    }
}
