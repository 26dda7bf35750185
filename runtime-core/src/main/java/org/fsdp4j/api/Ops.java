// The operations a model computes with: memory, GEMMs, element-wise maths and the layers'
// forward and backward kernels. A model gets one (its rank's device) and calls nothing else;
// the runtime's Backend extends it with streams, optimizer kernels and bookkeeping that models
// never touch. Every operation exists on the CPU and on CUDA with the same results up to
// rounding (the CPU is the reference).
//
// Conventions for every operation below:
// - Tensors are dense and row-major; shapes are checked, and a mismatch is an
//   IllegalArgumentException that names the operation and the shapes.
// - Floating inputs may be F32, F16 or BF16 unless a parameter says "F32"; arithmetic is fp32
//   (fp64 for the reductions that say so); results are rounded to the output's dtype (RNE).
// - Backward operations ACCUMULATE (+=) into every gradient they write, as llm.c does, so one
//   zero-fill per buffer serves several contributions. crossEntropyBackward is the one
//   exception (it overwrites, so dlogits may alias logits).
// - Work is queued in order on the rank's current stream and the call returns without waiting
//   for it, as on a GPU; the calls that hand a value to the host (copyToHost, toHost, sum) wait
//   for what they read. A model needs to know no more than that: inside forward and backward
//   it never reads a value back (the loss stays on the device).
// - Memory is stream-ordered: a tensor may be closed as soon as the last operation that reads
//   it has been called.
package org.fsdp4j.api;

/**
 * The operations a model computes with: memory, GEMMs, element-wise maths and the forward and
 * backward kernels of the layers. A {@link TrainableModel} receives one for its rank's device
 * and issues all its work through it.
 *
 * <p>Tensors are dense and row-major; floating inputs may be F32, F16 or BF16 unless a
 * parameter says F32, arithmetic is fp32, and results are rounded to the output's dtype.
 * Backward operations accumulate ({@code +=}) into every gradient they write, except
 * {@link #crossEntropyBackward}, which overwrites. Work is queued on the device and the call
 * returns without waiting; only the calls that hand a value to the host wait.
 */
public interface Ops {

    /** The device this instance computes on ("cpu", "cuda:0"). */
    Device device();

    // ------------------------------------------------------------------ memory

    /** A new tensor whose contents are undefined; the caller owns it and must close it. */
    Tensor allocate(DType dtype, MemoryCategory category, long... shape);

    default Tensor zeros(DType dtype, MemoryCategory category, long... shape) {
        Tensor t = allocate(dtype, category, shape);
        fill(t, 0f);
        return t;
    }

    /** Sets every element to {@code value} (rounded to the dtype; I32 takes the integer part). */
    void fill(Tensor t, float value);

    /** dst = src element for element; equal numel; casts (RNE) when the float dtypes differ. */
    void copy(Tensor src, Tensor dst);

    /** dst = src[srcOffset .. srcOffset+dst.numel()), rounded to dst's float dtype. */
    void copyFromHost(float[] src, int srcOffset, Tensor dst);

    /** dst (I32) = src[srcOffset .. srcOffset+dst.numel()). */
    void copyFromHost(int[] src, int srcOffset, Tensor dst);

    /** dst[dstOffset ..] = src widened to fp32. */
    void copyToHost(Tensor src, float[] dst, int dstOffset);

    /** dst[dstOffset ..] = src (I32). */
    void copyToHost(Tensor src, int[] dst, int dstOffset);

    default float[] toHost(Tensor src) {
        float[] out = new float[Math.toIntExact(src.numel())];
        copyToHost(src, out, 0);
        return out;
    }

    // ------------------------------------------------------------------ GEMM

    /**
     * For b in [0, batch): C_b = alpha · op(A_b) · op(B_b) + beta · C_b, all row-major, where
     * op(A_b) is m×k, op(B_b) is k×n, C_b is m×n; X_b starts strideX elements after X_{b-1}.
     * lda/ldb/ldc are the row strides (elements) of A, B, C as stored (A stored k×m when transA).
     * Half operands accumulate in fp32. C must not overlap A or B.
     */
    void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
              Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
              float beta, Tensor c, int ldc, long strideC, int batch);

    /** One dense GEMM with tight leading dims: C (m×n) = alpha · op(A) · op(B) + beta · C. */
    default void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                      Tensor a, Tensor b, float beta, Tensor c) {
        gemm(transA, transB, m, n, k, alpha,
                a, transA ? m : k, 0, b, transB ? k : n, 0, beta, c, n, 0, 1);
    }

    // ------------------------------------------------------------------ elementwise

    /** out = a + b; out may alias a or b. */
    void add(Tensor a, Tensor b, Tensor out);

    /** dst += src. */
    default void accumulate(Tensor dst, Tensor src) {
        add(dst, src, dst);
    }

    /** t *= alpha. */
    void scale(Tensor t, float alpha);

    /** out (N, OC) += bias (OC), broadcast over the rows. */
    void addBias(Tensor out, Tensor bias);

    /** dbias (OC) += column sums of dout (N, OC). */
    void biasBackward(Tensor dout, Tensor dbias);

    /** out = GELU(inp), GPT-2's tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
    void geluForward(Tensor inp, Tensor out);

    /** dinp += GELU'(inp) · dout. */
    void geluBackward(Tensor inp, Tensor dout, Tensor dinp);

    // ------------------------------------------------------------------ layers

    /**
     * LayerNorm over the last dim, eps = 1e-5. inp, out (N, C); weight, bias (C);
     * mean, rstd (N) F32, written for the backward.
     */
    void layerNormForward(Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd);

    /** Accumulates dinp (N, C), dweight (C), dbias (C) from dout (N, C) and the saved mean/rstd. */
    void layerNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                           Tensor dinp, Tensor dweight, Tensor dbias);

    /** out (B, T, C) = wte[tokens[b,t]] + wpe[t]; tokens (B, T) I32, wte (V, C), wpe (maxT ≥ T, C). */
    void embeddingForward(Tensor tokens, Tensor wte, Tensor wpe, Tensor out);

    /** dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += Σ_b dout[b,t]. Deterministic order. */
    void embeddingBackward(Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe);

    /** qkv (B, T, 3C) laid out [q | k | v] per token → q, k, v each (B, H, T, C/H). */
    void splitHeads(Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads);

    /** dqkv (B, T, 3C) += the inverse of splitHeads applied to dq, dk, dv (B, H, T, C/H). */
    void splitHeadsBackward(Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads);

    /** out (B, T, C) = y (B, H, T, C/H) with the heads put back side by side. */
    void mergeHeads(Tensor y, Tensor out);

    /** dy (B, H, T, C/H) += the inverse of mergeHeads applied to dout (B, T, C). */
    void mergeHeadsBackward(Tensor dout, Tensor dy);

    /**
     * out (B, N, M) = x (B, M, N) with its last two dimensions swapped (an MLP-Mixer's token
     * mixing runs a Linear over the transposed activations). mergeHeads with one-element heads.
     *
     * @param x   (B, M, N)
     * @param out (B, N, M), overwritten
     */
    default void transpose(Tensor x, Tensor out) {
        if (x.rank() != 3) {
            throw new IllegalArgumentException("transpose takes (B, M, N), got " + x);
        }
        mergeHeads(x.reshape(x.dim(0), x.dim(1), x.dim(2), 1), out);
    }

    /**
     * dx (B, M, N) += dout (B, N, M) with its last two dimensions swapped back: the backward of
     * {@link #transpose}.
     *
     * @param dout (B, N, M)
     * @param dx   (B, M, N), accumulated
     */
    default void transposeBackward(Tensor dout, Tensor dx) {
        if (dx.rank() != 3) {
            throw new IllegalArgumentException("transposeBackward takes dx (B, M, N), got " + dx);
        }
        mergeHeadsBackward(dout, dx.reshape(dx.dim(0), dx.dim(1), dx.dim(2), 1));
    }

    /**
     * Causal softmax over the last dim of preatt (BH, T, T): for row i,
     * att[i, j] = softmax_{j ≤ i}(scale · preatt[i, j]) and att[i, j] = 0 for j > i.
     */
    void causalSoftmaxForward(Tensor preatt, Tensor att, float scale);

    /** dpreatt (BH, T, T) += the gradient of causalSoftmaxForward given att and datt. */
    void causalSoftmaxBackward(Tensor att, Tensor datt, Tensor dpreatt, float scale);

    /** losses (N) F32 = −log softmax(logits (N, V))[targets (N) I32]. */
    void crossEntropyForward(Tensor logits, Tensor targets, Tensor losses);

    /**
     * dlogits (N, V) = (softmax(logits) − onehot(targets)) · dloss, OVERWRITTEN (not accumulated);
     * dlogits may be the same tensor as logits.
     */
    void crossEntropyBackward(Tensor logits, Tensor targets, float dloss, Tensor dlogits);

    // ------------------------------------------------------------------ reductions

    /** Σ x, accumulated in fp64 where the backend can (at least fp32 pairwise); reads the value back (waits). */
    double sum(Tensor t);

    /**
     * out[0] += scale · Σ t, on the device (no host synchronisation): Σ is accumulated as sum()
     * does and rounded once to out's dtype after scaling. out is one F32 element (a model's
     * mean loss is written this way).
     */
    void sumInto(Tensor t, float scale, Tensor out);
}
