// Token plus learned position embedding: x[b, t] = wte[tokens[b, t]] + wpe[t]. wte is also
// the LM head's weight, so its gradient gets contributions from both ends of the model.
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class Embedding {

    private final int vocabSize;
    private final int maxSeqLen;
    private final int dim;

    Embedding(int vocabSize, int maxSeqLen, int dim) {
        this.vocabSize = vocabSize;
        this.maxSeqLen = maxSeqLen;
        this.dim = dim;
    }

    /** out (B, T, C) from tokens (B, T) I32, wte (V, C), wpe (maxT, C). */
    void forward(Ops backend, Tensor tokens, Tensor wte, Tensor wpe, Tensor out) {
        check(tokens, wte, wpe, out);
        backend.embeddingForward(tokens, wte, wpe, out);
    }

    /** dwte (V, C) += scatter of dout (B, T, C) by token; dwpe (maxT, C) += dout summed over the batch. */
    void backward(Ops backend, Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe) {
        check(tokens, dwte, dwpe, dout);
        backend.embeddingBackward(tokens, dout, dwte, dwpe);
    }

    private void check(Tensor tokens, Tensor wte, Tensor wpe, Tensor activation) {
        Buffers.requireShape(wte, "wte", vocabSize, dim);
        Buffers.requireShape(wpe, "wpe", maxSeqLen, dim);
        Buffers.requireShape(activation, "embedding output", tokens.dim(0), tokens.dim(1), dim);
    }
}
