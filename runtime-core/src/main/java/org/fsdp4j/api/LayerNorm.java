// LayerNorm over the last dim (eps 1e-5, as PyTorch's default and GPT-2). Keeps the per-row
// mean and reciprocal std for the backward; the caller owns the input and output buffers.
package org.fsdp4j.api;


/**
 * LayerNorm over the last dimension, eps 1e-5 (PyTorch's default): {@code out = (inp − mean) ·
 * rstd · weight + bias} per row. Stateless: the caller owns the buffers and passes the unit's
 * parameters; the forward returns the per-row statistics the backward needs.
 */
public final class LayerNorm {

    /**
     * What the backward needs besides the input: per-row statistics, each (N) fp32. Close it
     * after the backward (or when the forward is abandoned).
     *
     * @param mean each row's mean
     * @param rstd each row's reciprocal standard deviation
     */
    public record Saved(Tensor mean, Tensor rstd) implements AutoCloseable {
        /** Frees both statistics. */
        @Override
        public void close() {
            mean.close();
            rstd.close();
        }
    }

    private final int dim;

    /**
     * A LayerNorm over rows of {@code dim} elements.
     *
     * @param dim C, the last dimension
     */
    public LayerNorm(int dim) {
        this.dim = dim;
    }

    /**
     * out (N, C) = (inp − mean) · rstd · weight + bias, rows = all leading dims.
     *
     * @param backend the operations to issue on
     * @param inp     (N, C), any leading dimensions
     * @param weight  (C)
     * @param bias    (C)
     * @param out     (N, C), overwritten
     * @return the statistics the backward needs (ACTIVATIONS; the caller closes them)
     */
    public Saved forward(Ops backend, Tensor inp, Tensor weight, Tensor bias, Tensor out) {
        int rows = rows(inp, out);
        Tensor mean = backend.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows);   // (N)
        Tensor rstd = backend.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows);   // (N)
        backend.layerNormForward(inp.reshape(rows, dim), weight, bias, out.reshape(rows, dim), mean, rstd);
        return new Saved(mean, rstd);
    }

    /**
     * Accumulates dinp (N, C), dweight (C), dbias (C) from dout (N, C).
     *
     * @param backend the operations to issue on
     * @param saved   the forward's statistics
     * @param dout    (N, C), the output's gradient
     * @param inp     (N, C), the forward's input
     * @param weight  (C)
     * @param dinp    (N, C), accumulated
     * @param dweight (C), accumulated
     * @param dbias   (C), accumulated
     */
    public void backward(Ops backend, Saved saved, Tensor dout, Tensor inp, Tensor weight,
                  Tensor dinp, Tensor dweight, Tensor dbias) {
        int rows = rows(inp, dout);
        Tensor.requireShape(dinp, "LayerNorm dinp", inp.shape());
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
