// RMSNorm over the last dim with a gain and no bias (Llama's): out = x / √(mean(x²) + eps) · weight.
// Keeps the per-row reciprocal root mean square for the backward; the caller owns the input and
// output buffers.
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class RmsNorm {

    private final int dim;
    private final float eps;

    RmsNorm(int dim, double eps) {
        this.dim = dim;
        this.eps = (float) eps;
    }

    /** out (N, C) = RMSNorm(inp) · weight, rows = all leading dims; returns rstd (N) F32 for the backward. */
    Tensor forward(Ops backend, Tensor inp, Tensor weight, Tensor out) {
        int rows = rows(inp, out);
        Tensor rstd = Buffers.statistics(backend, rows);   // (N)
        backend.rmsNormForward(inp.reshape(rows, dim), weight, out.reshape(rows, dim), rstd, eps);
        return rstd;
    }

    /** Accumulates dinp (N, C) and dweight (C) from dout (N, C). */
    void backward(Ops backend, Tensor rstd, Tensor dout, Tensor inp, Tensor weight, Tensor dinp, Tensor dweight) {
        int rows = rows(inp, dout);
        Buffers.requireShape(dinp, "RMSNorm dinp", inp.shape());
        backend.rmsNormBackward(dout.reshape(rows, dim), inp.reshape(rows, dim), weight, rstd, dinp.reshape(rows, dim),
                dweight);
    }

    private int rows(Tensor inp, Tensor other) {
        if (inp.dim(-1) != dim || inp.numel() != other.numel()) {
            throw new IllegalArgumentException("RMSNorm(" + dim + "): " + inp + " and " + other + " do not match");
        }
        return Math.toIntExact(inp.numel() / dim);
    }
}
