// Llama's feed-forward part: down(SiLU(gate(x)) · up(x)), three Linears C→F, C→F, F→C without biases.
package org.fsdp4j.model;

import org.fsdp4j.api.Linear;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class SwiGluMlp {

    /** What the backward needs besides the input. */
    record Saved(Tensor gate, Tensor up, Tensor hidden) implements AutoCloseable {   // each (B, T, F)
        @Override
        public void close() {
            Buffers.close(gate, up, hidden);
        }
    }

    private final int hiddenDim;
    private final Linear gateProj;
    private final Linear upProj;
    private final Linear downProj;

    SwiGluMlp(int embedDim, int hiddenDim) {
        this.hiddenDim = hiddenDim;
        this.gateProj = new Linear(embedDim, hiddenDim);
        this.upProj = new Linear(embedDim, hiddenDim);
        this.downProj = new Linear(hiddenDim, embedDim);
    }

    /** The first part, SiLU(gate(inp)) · up(inp): all the backward needs (a recompute can stop here). */
    Saved hidden(Ops backend, Tensor inp, Tensor wGate, Tensor wUp) {
        long b = inp.dim(0);
        long t = inp.dim(1);
        Tensor gate = Buffers.activation(backend, inp.dtype(), b, t, hiddenDim);     // (B, T, F)
        Tensor up = Buffers.activation(backend, inp.dtype(), b, t, hiddenDim);       // (B, T, F)
        Tensor hidden = Buffers.activation(backend, inp.dtype(), b, t, hiddenDim);   // (B, T, F)
        gateProj.forward(backend, inp, wGate, null, gate);
        upProj.forward(backend, inp, wUp, null, up);
        backend.swigluForward(gate, up, hidden);
        return new Saved(gate, up, hidden);
    }

    /** The second part: out (B, T, C) = down(saved hidden). */
    void project(Ops backend, Saved saved, Tensor wDown, Tensor out) {
        downProj.forward(backend, saved.hidden(), wDown, null, out);
    }

    /**
     * dinp (B, T, C) = the input's gradient (overwritten, not accumulated), and the three weight
     * gradients accumulated, from dout (B, T, C).
     */
    void backward(Ops backend, Saved saved, Tensor inp, Tensor dout, Tensor dinp, Tensor wGate, Tensor wUp,
                  Tensor wDown, Tensor dwGate, Tensor dwUp, Tensor dwDown) {
        long b = inp.dim(0);
        long t = inp.dim(1);
        Tensor dhidden = Buffers.activation(backend, inp.dtype(), b, t, hiddenDim);       // (B, T, F), overwritten
        downProj.backward(backend, dout, saved.hidden(), wDown, dhidden, false, dwDown, null);
        Tensor dgate = Buffers.zeroedActivation(backend, inp.dtype(), b, t, hiddenDim);   // (B, T, F)
        Tensor dup = Buffers.zeroedActivation(backend, inp.dtype(), b, t, hiddenDim);     // (B, T, F)
        backend.swigluBackward(saved.gate(), saved.up(), dhidden, dgate, dup);
        dhidden.close();
        gateProj.backward(backend, dgate, inp, wGate, dinp, false, dwGate, null);
        dgate.close();
        upProj.backward(backend, dup, inp, wUp, dinp, true, dwUp, null);
        dup.close();
    }
}
