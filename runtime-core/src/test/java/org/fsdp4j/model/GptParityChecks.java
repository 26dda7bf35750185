// Parity with PyTorch (issues 2 and 4) for the GPT (ParityChecks holds the checks): the GPT and
// AdamW on a backend against tools/reference/gpt_reference.py's float64 results for the same fp32
// weights, and against PyTorch's bf16 autocast from the same bf16 weights. Two dumps of each:
// nanoGPT's init, and large weights where the nonlinearities, biases and gains matter. A subclass
// names the backend (GptParityTest: the CPU; cuda-kernels' CudaGptParityTest: a GPU, through
// runtime-core's test-jar). The tolerances below are derived for this model.
package org.fsdp4j.model;

import java.util.List;

public abstract class GptParityChecks extends ParityChecks {

    // Tolerances: fail when |a − b| > atol·max|ref| + rtol·|ref| (GradCheck.assertClose, per tensor).
    // The reference is float64. PyTorch's own fp32 run lands within 4.3e-7·max|ref| of it on the logits
    // and 1.0e-6·max|ref| on the gradients (headers' torchFp32Error, worst of the two dumps). The bugs
    // of tools/reference/bug_sensitivity.py move the large-weights dump's logits/gradients by at least
    // 5e-5/1.1e-4·max|ref| (GELU cubic 0.0446 for 0.044715), more for exact GELU (2e-4/8e-4), an
    // attention scale off by 0.1% (9e-4/1.4e-3) or LayerNorm eps 1e-6 (1e-4/1.4e-4).
    // Logits: ~10x PyTorch's fp32 error, 10x below the smallest bug above.
    public static final double LOGITS_ATOL = 5e-6;
    public static final double LOGITS_RTOL = 1e-6;
    // Loss: the mean of B·T = 64 fp32 losses of ~5, a few ulps (4.8e-7 each) of the value.
    public static final double LOSS_RTOL = 1e-6;
    // Gradients: 20x PyTorch's fp32 error (sums that cancel, e.g. LayerNorm gains), 5x below the smallest bug.
    static final double GRAD_ATOL = 2e-5;
    static final double GRAD_RTOL = 1e-6;
    // One AdamW step from the reference gradients: elementwise, so only the rounding of fp32 weights
    // is left (ulp of 1.0 is 1.2e-7); decay on biases and gains moves the weights by 1e-4·max|ref|, eps 1e-6
    // for 1e-8 by 6e-4, L2 instead of decoupled decay by 3e-3.
    static final double STEP_ATOL = 1e-6;
    static final double STEP_RTOL = 1e-6;
    // Required by issue 2; PyTorch's fp32 run stays within 2e-7 of the float64 losses, while beta2 0.999
    // for 0.95 moves them by 8e-4, decay on every parameter by 9e-5, eps 1e-6 for 1e-8 by 1.3e-5.
    static final double STEP_LOSS_RTOL = 1e-5;

    // bf16 (issue 8): parameters, activations and gradients in bf16, against PyTorch's bf16 autocast from
    // the same bf16 weights (tools/reference/README.md gives its numerics). bf16 keeps 8 significant
    // bits: the spacing (ulp) of x lies between 2^-8·|x| and 2^-7·|x|, and RNE moves x by at most
    // u·|x|, u = 2^-8.
    //
    // Where fsdp4j and PyTorch round at the same points, their values before a rounding differ by fp32
    // noise only (summation orders: OpenBLAS over widened operands, oneDNN's bf16 dot products, cuBLAS;
    // LayerNorm statistics in fp64 or fp32; exp): ~2^-24·√K relative for a K-term sum. That changes the
    // rounded value only when it straddles a rounding boundary, with probability ~2^-24·√K / 2^-8 ≈ 1e-4
    // per element and rounding point (K ≤ 128 here), and then by one ulp, ≤ 2^-7·|x|; downstream values
    // move by a fraction of their own ulp. So the results equal PyTorch's bit for bit but for rare flips:
    //  - no element further than one ulp of the tensor's largest value, 2^-7·max|ref| (its own flip,
    //    plus fractions of an ulp from flips upstream): catches any gross mistake;
    //  - at most 2% of the elements differing at all, ~100x the measured rate on the CPU (1 of 4096
    //    logits, 0 or 1 element of each gradient held to it). Mistakes in the rounding points move most
    //    elements; each was made on purpose once (not committed) and failed here, on both dumps:
    //    LayerNorm with bf16 mean and rstd (65% of the logits differ with nanoGPT's init, 80% with the
    //    large weights), the GELU output, the attention probabilities or the attention residual left in
    //    fp32 (49-74%), the logits not rounded (100%); in the backward, LayerNorm's with bf16 statistics,
    //    the residual gradient or GELU's input gradient left in fp32 (41-72% of the last block's ln2 gain
    //    gradient). An fp32 softmax input gradient (behind the first difference below) passed.
    // Loss: per row, Σ_v |∂loss/∂logit_v| ≤ 2 and the loss averages rows, so |Δloss| ≤ 2·max|Δlogit|, plus
    // the fp32 rounding of the losses (LOSS_RTOL).
    static final double BF16_ULP_OF_MAX = 0x1p-7;
    static final double BF16_MAX_DIFFERING = 0.02;
    // The forward rounds where PyTorch's does (a Linear rounds once, bias included), so the logits and the
    // loss are held to the above. The backward differs at two points of every block: LayerNorm's input
    // gradient is added to the residual gradient in fp32 and rounded once (PyTorch rounds it to bf16 first,
    // then rounds the sum), and the softmax backward reads the bf16 attention probabilities (PyTorch keeps
    // its fp32 softmax output). So only the gradients complete before the last block's ln2 backward (lnf,
    // that block's ln2 and MLP) are held to the above. Behind the first difference, every rounding flips with
    // the probability the difference sets, and the two backward passes become independent bf16 computations
    // from one forward: |a − b| ≤ |a − exact| + |b − exact| ≈ 2 × PyTorch's own bf16 error (the header's
    // torchBf16Error, worst tensor: 1.0e-2·max|ref| for nanoGPT's init, 1.7e-2 for the large weights; measured
    // |a − b| ≤ 1.2e-2). That still catches a wrong index, term or scale (O(max|ref|)), not a rounding point:
    // the attention backward's rounding points and the embedding's gradient sums are not held to PyTorch's.
    static final double BF16_DIVERGED_GRAD_FACTOR = 2;

    @Override
    protected List<String> fp32Dumps() {
        return List.of("/reference/gpt_tiny.bin", "/reference/gpt_tiny_large.bin");
    }

    @Override
    protected List<String> bf16Dumps() {
        return List.of("/reference/gpt_tiny_bf16.bin", "/reference/gpt_tiny_large_bf16.bin");
    }

    @Override
    protected Tolerances tolerances() {
        return new Tolerances(LOGITS_ATOL, LOGITS_RTOL, LOSS_RTOL, GRAD_ATOL, GRAD_RTOL, STEP_ATOL, STEP_RTOL,
                STEP_LOSS_RTOL, BF16_ULP_OF_MAX, BF16_MAX_DIFFERING, BF16_DIVERGED_GRAD_FACTOR);
    }

    /** Those complete before the last block's ln2 backward adds into the residual gradient (see BF16_DIVERGED_GRAD_FACTOR). */
    @Override
    protected boolean reachedThroughTheSameRoundings(String name, int numLayers) {
        String lastBlock = "h." + (numLayers - 1) + ".";
        return name.startsWith("lnf.") || name.startsWith(lastBlock + "ln2.") || name.startsWith(lastBlock + "mlp.");
    }
}
