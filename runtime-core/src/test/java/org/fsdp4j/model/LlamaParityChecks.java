// Parity with PyTorch for the Llama (ParityChecks holds the checks): LlamaModel and AdamW on a
// backend against tools/reference/llama_reference.py's float64 results for the same fp32 weights,
// and against PyTorch's bf16 autocast from the same bf16 weights. Two dumps of each: fsdp4j's init,
// and large weights where SiLU, the softmax, the rotations and the RMSNorm gains matter. A subclass
// names the backend (LlamaParityTest: the CPU; cuda-kernels' CudaLlamaParityTest: a GPU). The
// tolerances below are derived for this model.
package org.fsdp4j.model;

import java.util.List;

public abstract class LlamaParityChecks extends ParityChecks {

    static final double LOGITS_ATOL = 5e-6;
    static final double LOGITS_RTOL = 1e-6;
    static final double LOSS_RTOL = 1e-6;
    static final double GRAD_ATOL = 2e-5;
    static final double GRAD_RTOL = 1e-6;
    static final double STEP_ATOL = 1e-6;
    static final double STEP_RTOL = 1e-6;
    static final double STEP_LOSS_RTOL = 1e-5;
    static final double BF16_ULP_OF_MAX = 0x1p-7;
    static final double BF16_MAX_DIFFERING = 0.02;
    static final double BF16_DIVERGED_GRAD_FACTOR = 2;

    @Override
    protected List<String> fp32Dumps() {
        return List.of("/reference/llama_tiny.bin", "/reference/llama_tiny_large.bin");
    }

    @Override
    protected List<String> bf16Dumps() {
        return List.of("/reference/llama_tiny_bf16.bin", "/reference/llama_tiny_large_bf16.bin");
    }

    @Override
    protected Tolerances tolerances() {
        return new Tolerances(LOGITS_ATOL, LOGITS_RTOL, LOSS_RTOL, GRAD_ATOL, GRAD_RTOL, STEP_ATOL, STEP_RTOL,
                STEP_LOSS_RTOL, BF16_ULP_OF_MAX, BF16_MAX_DIFFERING, BF16_DIVERGED_GRAD_FACTOR);
    }

    /** Those complete before the last block's MLP input gradient (see BF16_DIVERGED_GRAD_FACTOR). */
    @Override
    protected boolean reachedThroughTheSameRoundings(String name, int numLayers) {
        String lastMlp = "model.layers." + (numLayers - 1) + ".mlp.";
        return name.equals("lm_head.weight") || name.equals("model.norm.weight") || name.startsWith(lastMlp);
    }
}
