// Floating-point operations of a decoder's training step, the usual way (Kaplan et al.; PaLM
// appendix B): 6 per parameter per token for the matmuls of forward (2) and backward (4), plus
// the attention score and value matmuls, 12·L·C·T per token for forward and backward (C = the
// query heads' width; grouped-query attention shares keys and values, not these products). The
// full T×T attention is counted, not the causal half, since that is what the kernels compute.
package org.fsdp4j.metrics;

import org.fsdp4j.model.ModelConfig;

public final class Flops {

    private Flops() {
    }

    /**
     * FLOPs of one forward+backward over {@code batchSize}×{@code seqLen} tokens. P counts every
     * parameter: GPT's tied token embedding is the LM head's weight, so it takes part in a matmul
     * (Llama's embedding, a lookup, is counted too: the usual convention, 2·V·C/(6·P) high).
     */
    public static double trainingStep(ModelConfig model, long parameters, int batchSize, int seqLen) {
        double tokens = (double) batchSize * seqLen;
        double attentionPerToken = 12.0 * model.numLayers() * model.embedDim() * seqLen;
        return tokens * (6.0 * parameters + attentionPerToken);
    }

    /** FLOPs of one m×n×k GEMM: a multiply and an add per term. */
    public static double gemm(long m, long n, long k) {
        return 2.0 * m * n * k;
    }
}
