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
//   zero-fill per buffer serves several contributions. crossEntropyBackward and ropeBackward are
//   the exceptions (they overwrite, so the gradient may alias its input, in place).
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
 * {@link #crossEntropyBackward} and {@link #ropeBackward}, which overwrite. Work is queued on the device and the call
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

    /**
     * SwiGLU's gated unit (Llama's MLP): {@code out = SiLU(gate) · up} element for element, with
     * {@code SiLU(x) = x · σ(x)}.
     *
     * @param gate any shape, F32, F16 or BF16
     * @param up   the same shape as {@code gate}
     * @param out  the same shape, overwritten (rounded to its dtype); may be the same tensor as
     *             {@code gate} or {@code up}
     * @throws IllegalArgumentException if the element counts differ
     */
    void swigluForward(Tensor gate, Tensor up, Tensor out);

    /**
     * The backward of {@link #swigluForward}: {@code dgate += dout · up · SiLU'(gate)} and
     * {@code dup += dout · SiLU(gate)}, with {@code SiLU'(x) = σ(x) · (1 + x · (1 − σ(x)))}.
     *
     * @param gate  the forward's gate input
     * @param up    the forward's up input, the same shape
     * @param dout  the gradient of the forward's output, the same shape
     * @param dgate accumulated ({@code +=}), the same shape; must not alias the inputs
     * @param dup   accumulated ({@code +=}), the same shape; must not alias the inputs
     * @throws IllegalArgumentException if the element counts differ
     */
    void swigluBackward(Tensor gate, Tensor up, Tensor dout, Tensor dgate, Tensor dup);

    // ------------------------------------------------------------------ layers

    /**
     * LayerNorm over the last dim, eps = 1e-5. inp, out (N, C); weight, bias (C);
     * mean, rstd (N) F32, written for the backward.
     */
    void layerNormForward(Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd);

    /** Accumulates dinp (N, C), dweight (C), dbias (C) from dout (N, C) and the saved mean/rstd. */
    void layerNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                           Tensor dinp, Tensor dweight, Tensor dbias);

    /**
     * RMSNorm over the last dimension (Llama's norm; no mean subtraction, no bias):
     * {@code out[n, c] = inp[n, c] · rstd[n] · weight[c]} with
     * {@code rstd[n] = 1 / √(mean_c(inp[n, c]²) + eps)}, the statistics in fp32.
     *
     * @param inp    (N, C), any rank whose last dimension is C (the leading ones are N)
     * @param weight (C)
     * @param out    the shape of {@code inp}, overwritten; must not alias {@code inp}
     * @param rstd   (N) F32, overwritten with each row's 1/RMS for {@link #rmsNormBackward}
     * @param eps    added to the mean square, greater than 0 (Llama: 1e-5 or 1e-6)
     * @throws IllegalArgumentException if the shapes disagree or rstd is not F32
     */
    void rmsNormForward(Tensor inp, Tensor weight, Tensor out, Tensor rstd, float eps);

    /**
     * The backward of {@link #rmsNormForward}, from its saved {@code rstd}:
     * {@code dinp += rstd · (weight · dout − x̂ · mean_c(x̂ · weight · dout))} with
     * {@code x̂ = inp · rstd}, and {@code dweight += Σ_n dout · x̂}.
     *
     * @param dout    (N, C), the gradient of the forward's output
     * @param inp     (N, C), the forward's input
     * @param weight  (C)
     * @param rstd    (N) F32, as the forward wrote it
     * @param dinp    (N, C), accumulated ({@code +=}); must not alias {@code dout} or {@code inp}
     * @param dweight (C), accumulated ({@code +=})
     * @throws IllegalArgumentException if the shapes disagree or rstd is not F32
     */
    void rmsNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp, Tensor dweight);

    /**
     * Token embedding, with learned positions or without: {@code out[b, t] = wte[tokens[b, t]] + wpe[t]},
     * or {@code out[b, t] = wte[tokens[b, t]]} when {@code wpe} is null (a model whose positions
     * enter elsewhere, e.g. as rotary turns of q and k).
     *
     * @param tokens (B, T) I32, each in {@code [0, V)}
     * @param wte    (V, C), the token table
     * @param wpe    (maxT ≥ T, C), the position table, or null for none
     * @param out    (B, T, C), overwritten
     * @throws IllegalArgumentException if the shapes or dtypes disagree
     */
    void embeddingForward(Tensor tokens, Tensor wte, Tensor wpe, Tensor out);

    /**
     * The backward of {@link #embeddingForward}: {@code dwte[tokens[b, t]] += dout[b, t]} and
     * {@code dwpe[t] += Σ_b dout[b, t]}, summed in a fixed order (the result does not depend on
     * threads or timing).
     *
     * @param tokens (B, T) I32, the forward's tokens
     * @param dout   (B, T, C), the gradient of the forward's output
     * @param dwte   (V, C), accumulated ({@code +=})
     * @param dwpe   (maxT ≥ T, C), accumulated ({@code +=}), or null when the forward had no positions
     * @throws IllegalArgumentException if the shapes or dtypes disagree
     */
    void embeddingBackward(Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe);

    /**
     * Splits a fused projection into attention heads, head-major: per token, {@code qkv} holds
     * {@code [q | k | v]} with H query heads and Hkv key/value heads of width D each (Hkv = H for
     * multi-head attention, fewer for grouped-query, 1 for multi-query), and head h of each goes to
     * its own (T, D) block.
     *
     * @param qkv      (B, T, (H + 2·Hkv)·D)
     * @param q        (B, H, T, D), overwritten
     * @param k        (B, Hkv, T, D), overwritten
     * @param v        (B, Hkv, T, D), overwritten
     * @param numHeads H, the query heads; Hkv is read from {@code k}'s shape
     * @throws IllegalArgumentException if the shapes disagree
     */
    void splitHeads(Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads);

    /**
     * The backward of {@link #splitHeads}: each head's gradient is put back into its place in
     * the fused layout and added.
     *
     * @param dq       (B, H, T, D)
     * @param dk       (B, Hkv, T, D)
     * @param dv       (B, Hkv, T, D)
     * @param dqkv     (B, T, (H + 2·Hkv)·D), accumulated ({@code +=})
     * @param numHeads H, the query heads
     * @throws IllegalArgumentException if the shapes disagree
     */
    void splitHeadsBackward(Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads);

    /**
     * Rotary position embedding (RoPE) in the half-split convention of GPT-NeoX and Hugging
     * Face's {@code rotate_half}: for each head and position t, and each i &lt; D/2, the pair
     * {@code (x_i, x_{i+D/2})} turns by the angle whose cosine and sine are {@code cos[t, i]} and
     * {@code sin[t, i]}:
     * {@code out_i = x_i·cos − x_{i+D/2}·sin}, {@code out_{i+D/2} = x_{i+D/2}·cos + x_i·sin}.
     *
     * @param inp (B, H, T, D), head-major (as {@link #splitHeads} writes q and k), D even
     * @param cos (T' ≥ T, D/2) F32, row t for position t
     * @param sin (T' ≥ T, D/2) F32
     * @param out (B, H, T, D), overwritten; may be the same tensor as {@code inp} (in place)
     * @throws IllegalArgumentException if the shapes disagree, D is odd or the tables are not F32
     */
    void ropeForward(Tensor inp, Tensor cos, Tensor sin, Tensor out);

    /**
     * The backward of {@link #ropeForward}: the rotation is orthogonal, so {@code dinp} is
     * {@code dout} turned back by the same angles. Unlike the other backward operations it
     * OVERWRITES {@code dinp} (it does not accumulate).
     *
     * @param dout (B, H, T, D), the gradient of the forward's output
     * @param cos  the forward's cosine table (T' ≥ T, D/2) F32
     * @param sin  the forward's sine table (T' ≥ T, D/2) F32
     * @param dinp (B, H, T, D), overwritten; may be the same tensor as {@code dout} (in place)
     * @throws IllegalArgumentException if the shapes disagree, D is odd or the tables are not F32
     */
    void ropeBackward(Tensor dout, Tensor cos, Tensor sin, Tensor dinp);

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
