// A fully connected layer, PyTorch layout: weight (OC, IC), optional bias (OC),
// out = inp · Wᵀ + b over the flattened leading dims. Also serves as the tied LM head
// (weight = wte, no bias). Stateless: the caller owns every buffer and passes the parameters.
// Public so a user's model gets the same numerics (and parity tests) as the built-in ones.
package org.fsdp4j.api;


/**
 * A fully connected layer in PyTorch's layout: {@code out = inp · weightᵀ + bias} over the
 * flattened leading dimensions, weight (OC, IC), bias (OC) or none. Stateless: the caller owns
 * every buffer and passes the unit's bound parameters, so one instance serves every rank and
 * every call. Half-precision outputs are rounded once, as PyTorch's bf16 linear is.
 */
public final class Linear {

    private final int inFeatures;
    private final int outFeatures;

    /**
     * A layer mapping {@code inFeatures} to {@code outFeatures}.
     *
     * @param inFeatures  IC, the input's last dimension
     * @param outFeatures OC, the output's last dimension
     */
    public Linear(int inFeatures, int outFeatures) {
        this.inFeatures = inFeatures;
        this.outFeatures = outFeatures;
    }

    /**
     * The input's last dimension.
     *
     * @return IC
     */
    public int inFeatures() {
        return inFeatures;
    }

    /**
     * The output's last dimension.
     *
     * @return OC
     */
    public int outFeatures() {
        return outFeatures;
    }

    /**
     * out (N, OC) = inp (N, IC) · weight (OC, IC)ᵀ + bias (OC); bias may be null. N = all leading dims.
     * A half out gets the bias first and the GEMM adds to it (beta = 1), so it is rounded once,
     * after the bias is added in fp32, as PyTorch's bf16 linear does (oneDNN on the CPU, cuBLASLt's
     * bias epilogue or addmm on a GPU); adding it after the GEMM would round twice, a quarter of the
     * outputs one ulp away from PyTorch's at every biased Linear (tools/reference/README.md). An
     * fp32 out keeps the GEMM-then-bias order, two passes over it fewer: its second rounding is
     * fp32's, within the fp32 parity tolerances (Ops.gemmThenAddBias: the CPU backend adds the
     * bias as its GEMM writes C, one pass fewer again).
     *
     * @param backend the operations to issue on
     * @param inp     (N, IC), any leading dimensions
     * @param weight  (OC, IC)
     * @param bias    (OC), or null for none
     * @param out     (N, OC), overwritten
     */
    public void forward(Ops backend, Tensor inp, Tensor weight, Tensor bias, Tensor out) {
        int rows = rows(inp, out, weight, bias);
        if (bias == null) {
            backend.gemm(false, true, rows, outFeatures, inFeatures, 1f, inp, weight, 0f, out);
            return;
        }
        if (out.dtype() == DType.F32) {
            backend.gemmThenAddBias(false, true, rows, outFeatures, inFeatures, inp, weight, out, bias);
            return;
        }
        backend.setBias(out.reshape(rows, outFeatures), bias);   // exact: activations have the bias's dtype
        backend.gemm(false, true, rows, outFeatures, inFeatures, 1f, inp, weight, 1f, out);
    }

    /**
     * pre (N, OC) = inp · weightᵀ + bias as {@link #forward} computes it, and out (N, OC) =
     * GELU(pre) as {@link Ops#geluForward} computes it: the first half of a GELU MLP. An fp32 layer
     * with a bias issues both as one {@link Ops#gemmThenAddBiasGelu} (a backend may apply the GELU
     * as it writes pre); any other, the two calls.
     *
     * @param backend the operations to issue on
     * @param inp     (N, IC), any leading dimensions
     * @param weight  (OC, IC)
     * @param bias    (OC), or null for none
     * @param pre     (N, OC), overwritten (the GELU's input, which its backward needs)
     * @param out     (N, OC), overwritten; not pre
     */
    public void forwardGelu(Ops backend, Tensor inp, Tensor weight, Tensor bias, Tensor pre, Tensor out) {
        int rows = rows(inp, pre, weight, bias);
        Tensor.requireShape(out, "Linear GELU output", pre.shape());
        if (bias != null && pre.dtype() == DType.F32) {
            backend.gemmThenAddBiasGelu(false, true, rows, outFeatures, inFeatures, inp, weight, pre, bias, out);
            return;
        }
        forward(backend, inp, weight, bias, pre);
        backend.geluForward(pre, out);
    }

    /**
     * The backward of a layer whose input was GELU(pre) ({@link #forwardGelu}'s out, fed to this
     * layer): dpre (N, IC) = GELU'(pre) ⊙ (dout · W), overwritten, through
     * {@link Ops#gemmThenGeluBackward}; dweight and dbias accumulate as {@link #backward}'s do.
     *
     * @param backend the operations to issue on
     * @param dout    (N, OC), the gradient of the output
     * @param inp     (N, IC), the forward's input, GELU(pre)
     * @param pre     (N, IC), the GELU's input
     * @param weight  (OC, IC)
     * @param dpre    (N, IC), pre's gradient, overwritten (a fresh buffer needs no zero-fill)
     * @param dweight (OC, IC), accumulated
     * @param dbias   (OC), accumulated; null when there is no bias
     */
    public void backwardThroughGelu(Ops backend, Tensor dout, Tensor inp, Tensor pre, Tensor weight, Tensor dpre,
                                    Tensor dweight, Tensor dbias) {
        int rows = rows(inp, dout, weight, dbias);
        Tensor.requireShape(pre, "Linear GELU input", inp.shape());
        Tensor.requireShape(dpre, "Linear GELU input's gradient", inp.shape());
        backend.gemmThenGeluBackward(false, false, rows, inFeatures, outFeatures, dout, weight, pre, dpre);
        backward(backend, dout, inp, weight, null, false, dweight, dbias);
    }

    /**
     * dinp (N, IC) (+)= dout · W, dweight (OC, IC) += doutᵀ · inp, dbias (OC) += column sums of dout
     * (dbias null when there is no bias). The parameter gradients always accumulate; dinp accumulates
     * when {@code accumulateDinp}, and is overwritten otherwise (a fresh buffer then needs no zero-fill).
     *
     * @param backend        the operations to issue on
     * @param dout           (N, OC), the gradient of the output
     * @param inp            (N, IC), the forward's input
     * @param weight         (OC, IC)
     * @param dinp           (N, IC), the input's gradient; null when the input needs none (a model's input)
     * @param accumulateDinp add to dinp (true) or overwrite it (false)
     * @param dweight        (OC, IC), accumulated
     * @param dbias          (OC), accumulated; null when there is no bias
     */
    public void backward(Ops backend, Tensor dout, Tensor inp, Tensor weight, Tensor dinp, boolean accumulateDinp,
                  Tensor dweight, Tensor dbias) {
        int rows = rows(inp, dout, weight, dbias);
        Tensor.requireShape(dweight, "Linear dweight", outFeatures, inFeatures);
        if (dinp != null) {
            Tensor.requireShape(dinp, "Linear dinp", inp.shape());
            backend.gemm(false, false, rows, inFeatures, outFeatures, 1f, dout, weight, accumulateDinp ? 1f : 0f, dinp);
        }
        backend.gemm(true, false, outFeatures, inFeatures, rows, 1f, dout, inp, 1f, dweight);
        if (dbias != null) {
            backend.biasBackward(dout.reshape(rows, outFeatures), dbias);
        }
    }

    private int rows(Tensor inp, Tensor out, Tensor weight, Tensor bias) {
        Tensor.requireShape(weight, "Linear weight", outFeatures, inFeatures);
        if (bias != null) {
            Tensor.requireShape(bias, "Linear bias", outFeatures);
        }
        if (inp.dim(-1) != inFeatures || out.dim(-1) != outFeatures
                || inp.numel() / inFeatures != out.numel() / outFeatures) {
            throw new IllegalArgumentException("Linear " + inFeatures + "->" + outFeatures + ": input " + inp
                    + " and output " + out + " do not match");
        }
        return Math.toIntExact(inp.numel() / inFeatures);
    }
}
