// LayerNorm over the last dim (eps 1e-5, as PyTorch's default and GPT-2). Keeps the per-row
// mean and reciprocal std for the backward; the caller owns the input and output buffers.
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class LayerNorm {

    /** What the backward needs besides the input: per-row statistics, each (N) fp32. */
    record Saved(Tensor mean, Tensor rstd) implements AutoCloseable {
        @Override
        public void close() {
            Buffers.close(mean, rstd);
        }
    }

    private final int dim;

    LayerNorm(int dim) {
        this.dim = dim;
    }

    /** out (N, C) = (inp − mean) · rstd · weight + bias, rows = all leading dims. */
    Saved forward(Ops backend, Tensor inp, Tensor weight, Tensor bias, Tensor out) {
        int rows = rows(inp, out);
        Tensor mean = Buffers.statistics(backend, rows);   // (N)
        Tensor rstd = Buffers.statistics(backend, rows);   // (N)
        backend.layerNormForward(inp.reshape(rows, dim), weight, bias, out.reshape(rows, dim), mean, rstd);
        return new Saved(mean, rstd);
    }

    /** Accumulates dinp (N, C), dweight (C), dbias (C) from dout (N, C). */
    void backward(Ops backend, Saved saved, Tensor dout, Tensor inp, Tensor weight,
                  Tensor dinp, Tensor dweight, Tensor dbias) {
        int rows = rows(inp, dout);
        Buffers.requireShape(dinp, "LayerNorm dinp", inp.shape());
        backend.layerNormBackward(dout.reshape(rows, dim), inp.reshape(rows, dim), weight, saved.mean(),
                saved.rstd(), dinp.reshape(rows, dim), dweight, dbias);
    }

    private int rows(Tensor inp, Tensor other) {
        if (inp.dim(-1) != dim || inp.numel() != other.numel()) {
            throw new IllegalArgumentException("LayerNorm(" + dim + "): " + inp + " and " + other + " do not match");
        }
        return Math.toIntExact(inp.numel() / dim);
    }
}
