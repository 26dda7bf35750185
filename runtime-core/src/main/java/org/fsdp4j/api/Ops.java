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
 * backward kernels of the layers. A {@link TrainableModel} receives one for its rank's device in
 * its {@link ModelContext} and issues all its work through it; the CPU backend (the reference)
 * and the CUDA backend implement every operation with the same results up to rounding.
 *
 * <p>Conventions for every operation:
 * <ul>
 *   <li><b>Shapes.</b> Tensors are dense and row-major; shapes are written as in PyTorch, with
 *       B the batch, T the sequence, C the channels, H the heads, V the vocabulary, and N "all
 *       leading dimensions flattened". Shapes and dtypes are checked when the call is made: a
 *       mismatch is an {@link IllegalArgumentException} naming the operation and the tensors.</li>
 *   <li><b>Dtypes.</b> Floating tensors may be F32, F16 or BF16 unless a parameter says F32 or
 *       I32; arithmetic is fp32 (fp64 for the reductions that say so) and results are rounded to
 *       the output's dtype, to nearest even.</li>
 *   <li><b>Accumulation.</b> Backward operations accumulate ({@code +=}) into every gradient they
 *       write, so one zero-fill per buffer serves several contributions;
 *       {@link #crossEntropyBackward} and {@link #ropeBackward} are the exceptions (they
 *       overwrite, so dlogits may alias logits and RoPE's backward may run in place). Forward
 *       operations overwrite their outputs unless they say they accumulate.</li>
 *   <li><b>Asynchrony.</b> Work is queued in order on the rank's current stream and the call
 *       returns without waiting for it, as on a GPU; only the calls that hand a value to the host
 *       ({@link #copyToHost(Tensor, float[], int)}, {@link #toHost}, {@link #sum}) wait for what
 *       they read. Inside forward and backward a model never reads a value back (the loss stays
 *       on the device).</li>
 *   <li><b>Memory.</b> Tensors from {@link #allocate} belong to the caller, who closes them.
 *       Memory is stream-ordered: a tensor may be closed as soon as the last operation that reads
 *       it has been called. Using a closed tensor is an {@link IllegalStateException}.</li>
 *   <li><b>Threads.</b> An instance belongs to one rank: call it from the thread that runs the
 *       model's forward and backward (the one that called {@link ModelFactory#create}).</li>
 * </ul>
 */
public interface Ops {

    /**
     * The device this instance computes on; every tensor it allocates lives there.
     *
     * @return e.g. {@code cpu} or {@code cuda:0}
     */
    Device device();

    // ------------------------------------------------------------------ memory

    /**
     * A new tensor on this device whose contents are undefined (fill it before reading). The
     * caller owns it and must close it; its bytes are counted under {@code category} in the
     * rank's {@link MemoryTracker}.
     *
     * @param dtype    the element type
     * @param category what it holds (a model's temporaries are {@link MemoryCategory#ACTIVATIONS})
     * @param shape    the shape; no dimensions for a scalar
     * @return the new tensor, owning its storage
     * @throws IllegalArgumentException if a dimension is negative
     */
    Tensor allocate(DType dtype, MemoryCategory category, long... shape);

    /**
     * A new tensor filled with zeros: {@link #allocate} then {@link #fill} with 0.
     *
     * @param dtype    the element type
     * @param category what it holds
     * @param shape    the shape
     * @return the new tensor, owned by the caller, who closes it
     * @throws IllegalArgumentException if a dimension is negative
     */
    default Tensor zeros(DType dtype, MemoryCategory category, long... shape) {
        Tensor t = allocate(dtype, category, shape);
        fill(t, 0f);
        return t;
    }

    /**
     * Sets every element to {@code value}, rounded to the tensor's dtype (I32 takes the integer
     * part).
     *
     * @param t     the tensor, overwritten
     * @param value the value
     */
    void fill(Tensor t, float value);

    /**
     * dst = src, element for element in row-major order (the shapes may differ); casts, rounding
     * to nearest even, when the floating dtypes differ.
     *
     * @param src any dtype
     * @param dst the same element count; floating if {@code src} is, I32 if {@code src} is
     * @throws IllegalArgumentException if the element counts differ, or an I32 tensor meets a floating one
     */
    void copy(Tensor src, Tensor dst);

    /**
     * dst = {@code src[srcOffset .. srcOffset + dst.numel())}, rounded to dst's floating dtype.
     * The host values are taken when the call is made: the array may be reused on return.
     *
     * @param src       host values
     * @param srcOffset the first value copied
     * @param dst       a floating tensor, overwritten
     * @throws IllegalArgumentException if the range is outside {@code src} or dst is I32
     */
    void copyFromHost(float[] src, int srcOffset, Tensor dst);

    /**
     * dst = {@code src[srcOffset .. srcOffset + dst.numel())}. The host values are taken when the
     * call is made: the array may be reused on return.
     *
     * @param src       host values (token ids, labels)
     * @param srcOffset the first value copied
     * @param dst       an I32 tensor, overwritten
     * @throws IllegalArgumentException if the range is outside {@code src} or dst is not I32
     */
    void copyFromHost(int[] src, int srcOffset, Tensor dst);

    /**
     * {@code dst[dstOffset .. dstOffset + src.numel())} = src widened to fp32. Waits for the work
     * that writes {@code src} (one host synchronisation).
     *
     * @param src       a floating tensor
     * @param dst       host array to write
     * @param dstOffset the first index written
     * @throws IllegalArgumentException if the range is outside {@code dst} or src is I32
     */
    void copyToHost(Tensor src, float[] dst, int dstOffset);

    /**
     * {@code dst[dstOffset .. dstOffset + src.numel())} = src. Waits for the work that writes
     * {@code src} (one host synchronisation).
     *
     * @param src       an I32 tensor
     * @param dst       host array to write
     * @param dstOffset the first index written
     * @throws IllegalArgumentException if the range is outside {@code dst} or src is not I32
     */
    void copyToHost(Tensor src, int[] dst, int dstOffset);

    /**
     * The tensor's values on the host, widened to fp32 (for tests and debugging; a model's
     * forward and backward never read back). Waits for the work that writes {@code src}.
     *
     * @param src a floating tensor of at most {@code Integer.MAX_VALUE} elements
     * @return a new array of {@code src.numel()} values, row-major
     * @throws IllegalArgumentException if src is I32
     * @throws ArithmeticException      if src has more elements than an array holds
     */
    default float[] toHost(Tensor src) {
        float[] out = new float[Math.toIntExact(src.numel())];
        copyToHost(src, out, 0);
        return out;
    }

    // ------------------------------------------------------------------ GEMM

    /**
     * Strided batched GEMM: for b in [0, batch), C_b = alpha · op(A_b) · op(B_b) + beta · C_b, all
     * row-major, where op(A_b) is m×k, op(B_b) is k×n and C_b is m×n (op transposes when
     * {@code transA}/{@code transB}). X_b starts strideX elements after X_{b-1}. Half operands
     * accumulate in fp32. A and B of one dtype, and C of that dtype or F32, run as they are;
     * other combinations are promoted through a copy (slower, and counted in
     * {@link StepMetrics#promotedCopies()}). The single-GEMM overload below covers the common case.
     *
     * @param transA  A is stored k×m and used transposed
     * @param transB  B is stored n×k and used transposed
     * @param m       rows of op(A) and C
     * @param n       columns of op(B) and C
     * @param k       the contracted dimension
     * @param alpha   the product's factor
     * @param a       A, any floating dtype
     * @param lda     the row stride of A as stored, in elements
     * @param strideA elements between A_b and A_{b+1} (0 to reuse one A)
     * @param b       B
     * @param ldb     the row stride of B as stored, in elements
     * @param strideB elements between B_b and B_{b+1} (0 to reuse one B)
     * @param beta    C's factor: 0 overwrites C, 1 accumulates into it
     * @param c       C, any floating dtype (F32 or A's runs without promotion); must not overlap A or B
     * @param ldc     the row stride of C, in elements
     * @param strideC elements between C_b and C_{b+1}
     * @param batch   GEMMs to run, at least 1
     * @throws IllegalArgumentException if a matrix reaches outside its tensor, C overlaps A or B,
     *                                  or a tensor is I32
     */
    void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
              Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
              float beta, Tensor c, int ldc, long strideC, int batch);

    /**
     * One dense GEMM with tight row strides: C (m×n) = alpha · op(A) · op(B) + beta · C, as
     * {@code inp · weightᵀ} is {@code gemm(false, true, N, OC, IC, 1, inp, weight, 0, out)}.
     *
     * @param transA A is stored k×m and used transposed
     * @param transB B is stored n×k and used transposed
     * @param m      rows of op(A) and C
     * @param n      columns of op(B) and C
     * @param k      the contracted dimension
     * @param alpha  the product's factor
     * @param a      A: m×k, or k×m when {@code transA}
     * @param b      B: k×n, or n×k when {@code transB}
     * @param beta   C's factor: 0 overwrites C, 1 accumulates into it
     * @param c      C, m×n; must not overlap A or B
     * @throws IllegalArgumentException if a matrix reaches outside its tensor, C overlaps A or B,
     *                                  or a tensor is I32
     */
    default void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                      Tensor a, Tensor b, float beta, Tensor c) {
        gemm(transA, transB, m, n, k, alpha,
                a, transA ? m : k, 0, b, transB ? k : n, 0, beta, c, n, 0, 1);
    }

    /**
     * A Linear's fp32 forward: C (m×n) = op(A) · op(B), then {@code bias} added to every row of C,
     * each sum rounded in C's dtype after the product is (the bits of {@code gemm(…, 1, a, b, 0, c)}
     * followed by {@link #addBias}, which is the default). A backend may add the bias as it writes
     * C, saving a pass over it.
     *
     * @param transA A is stored k×m and used transposed
     * @param transB B is stored n×k and used transposed
     * @param m      rows of op(A) and C
     * @param n      columns of op(B) and C
     * @param k      the contracted dimension
     * @param a      A: m×k, or k×m when {@code transA}
     * @param b      B: k×n, or n×k when {@code transB}
     * @param c      C, m×n, overwritten; must not overlap A or B
     * @param bias   (n)
     */
    default void gemmThenAddBias(boolean transA, boolean transB, int m, int n, int k, Tensor a, Tensor b, Tensor c,
                                 Tensor bias) {
        gemm(transA, transB, m, n, k, 1f, a, b, 0f, c);
        addBias(c.reshape(m, n), bias);
    }

    /**
     * A biased Linear followed by the GELU (an MLP's first half): {@code pre} (m×n) = op(A) · op(B)
     * + bias as {@link #gemmThenAddBias} computes it, and {@code out} = GELU(pre) as
     * {@link #geluForward} computes it (the default: those two calls, so the same bits). A backend
     * may apply the GELU as it writes {@code pre}, saving a pass over it.
     *
     * @param transA A is stored k×m and used transposed
     * @param transB B is stored n×k and used transposed
     * @param m      rows of op(A) and of pre
     * @param n      columns of op(B) and of pre
     * @param k      the contracted dimension
     * @param a      A: m×k, or k×m when {@code transA}
     * @param b      B: k×n, or n×k when {@code transB}
     * @param pre    m×n, overwritten; must not overlap A, B or out
     * @param bias   (n)
     * @param out    m×n elements, overwritten
     */
    default void gemmThenAddBiasGelu(boolean transA, boolean transB, int m, int n, int k, Tensor a, Tensor b,
                                     Tensor pre, Tensor bias, Tensor out) {
        gemmThenAddBias(transA, transB, m, n, k, a, b, pre, bias);
        geluForward(pre, out);
    }

    /**
     * The gradient through a GELU of the product that follows it (an MLP's backward into its
     * hidden layer): {@code dpre} (m×n) = GELU'(pre) ⊙ (op(A) · op(B)), overwritten. The default
     * computes the product into a temporary buffer, zeroes dpre and calls {@link #geluBackward}; a
     * backend may apply GELU' as it writes the product (the same bits), with no temporary, no zero
     * fill and no pass over the product.
     *
     * @param transA A is stored k×m and used transposed
     * @param transB B is stored n×k and used transposed
     * @param m      rows of op(A) and of dpre
     * @param n      columns of op(B) and of dpre
     * @param k      the contracted dimension
     * @param a      A: m×k, or k×m when {@code transA}
     * @param b      B: k×n, or n×k when {@code transB}
     * @param pre    the GELU's input, m×n elements
     * @param dpre   m×n, overwritten; must not overlap A, B or pre
     */
    default void gemmThenGeluBackward(boolean transA, boolean transB, int m, int n, int k, Tensor a, Tensor b,
                                      Tensor pre, Tensor dpre) {
        try (Tensor product = allocate(dpre.dtype(), MemoryCategory.ACTIVATIONS, dpre.shape())) {
            gemm(transA, transB, m, n, k, 1f, a, b, 0f, product);
            fill(dpre, 0f);
            geluBackward(pre, product, dpre);
        }
    }

    // ------------------------------------------------------------------ elementwise

    /**
     * out = a + b, element-wise.
     *
     * @param a   any floating dtype
     * @param b   the same element count
     * @param out the same element count, overwritten; may be {@code a} or {@code b}
     * @throws IllegalArgumentException if the element counts differ or a tensor is I32
     */
    void add(Tensor a, Tensor b, Tensor out);

    /**
     * dst += src, element-wise: {@code add(dst, src, dst)}.
     *
     * @param dst accumulated
     * @param src the same element count
     * @throws IllegalArgumentException if the element counts differ or a tensor is I32
     */
    default void accumulate(Tensor dst, Tensor src) {
        add(dst, src, dst);
    }

    /**
     * out = (a + b) · alpha, element-wise: the sum rounded to out's dtype, then the product: the
     * bits of {@code add(a, b, out)} then {@code scale(out, alpha)}, which is the default. A
     * backend may do it in one pass (the CPU's does for fp32 out: the communicators' averaging
     * reductions finish with it).
     *
     * @param a     any floating dtype
     * @param b     the same element count
     * @param alpha the factor
     * @param out   the same element count, overwritten; may be {@code a} or {@code b}
     * @throws IllegalArgumentException if the element counts differ or a tensor is I32
     */
    default void addScaled(Tensor a, Tensor b, float alpha, Tensor out) {
        add(a, b, out);
        scale(out, alpha);
    }

    /**
     * t *= alpha, element-wise, in place.
     *
     * @param t     a floating tensor
     * @param alpha the factor
     * @throws IllegalArgumentException if t is I32
     */
    void scale(Tensor t, float alpha);

    /**
     * out (N, OC) += bias (OC), broadcast over the rows.
     *
     * @param out  (N, OC), accumulated
     * @param bias (OC)
     */
    void addBias(Tensor out, Tensor bias);

    /**
     * out (N, OC) = bias (OC) in every row: where a half-precision Linear starts its output, so
     * that its GEMM (beta = 1) rounds once with the bias included. The default fills and adds
     * (two passes); a backend may write it in one.
     *
     * @param out  (N, OC), overwritten
     * @param bias (OC)
     */
    default void setBias(Tensor out, Tensor bias) {
        fill(out, 0f);
        addBias(out, bias);
    }

    /**
     * dbias (OC) += the column sums of dout (N, OC): the bias's gradient.
     *
     * @param dout  (N, OC), the output's gradient
     * @param dbias (OC), accumulated
     */
    void biasBackward(Tensor dout, Tensor dbias);

    /**
     * out = GELU(inp), GPT-2's tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))),
     * element-wise.
     *
     * @param inp any shape
     * @param out the same element count, overwritten
     */
    void geluForward(Tensor inp, Tensor out);

    /**
     * dinp += GELU'(inp) · dout, element-wise.
     *
     * @param inp  the forward's input
     * @param dout the output's gradient, inp's element count
     * @param dinp the input's gradient, inp's element count, accumulated
     */
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
     * LayerNorm over the last dimension, eps 1e-5: out = (inp − mean) · rstd · weight + bias per
     * row, writing each row's statistics for the backward.
     *
     * @param inp    (N, C)
     * @param weight (C)
     * @param bias   (C)
     * @param out    (N, C), overwritten
     * @param mean   (N) F32, overwritten with each row's mean
     * @param rstd   (N) F32, overwritten with each row's reciprocal standard deviation
     */
    void layerNormForward(Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd);

    /**
     * Accumulates the LayerNorm gradients from the output's gradient and the forward's statistics.
     *
     * @param dout    (N, C), the output's gradient
     * @param inp     (N, C), the forward's input
     * @param weight  (C)
     * @param mean    (N) F32, from {@link #layerNormForward}
     * @param rstd    (N) F32, from {@link #layerNormForward}
     * @param dinp    (N, C), accumulated
     * @param dweight (C), accumulated
     * @param dbias   (C), accumulated
     */
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

    /**
     * Puts the heads back side by side: out[b, t, h·C/H + i] = y[b, h, t, i].
     *
     * @param y   (B, H, T, C/H)
     * @param out (B, T, C), overwritten
     */
    void mergeHeads(Tensor y, Tensor out);

    /**
     * dy (B, H, T, C/H) += the inverse of {@link #mergeHeads} applied to dout (B, T, C).
     *
     * @param dout (B, T, C), the output's gradient
     * @param dy   (B, H, T, C/H), accumulated
     */
    void mergeHeadsBackward(Tensor dout, Tensor dy);

    /**
     * out (B, N, M) = x (B, M, N) with its last two dimensions swapped (an MLP-Mixer's token
     * mixing runs a Linear over the transposed activations). mergeHeads with one-element heads.
     *
     * @param x   (B, M, N)
     * @param out (B, N, M), overwritten
     * @throws IllegalArgumentException if x is not of rank 3 or out does not match
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
     * @throws IllegalArgumentException if dx is not of rank 3 or dout does not match
     */
    default void transposeBackward(Tensor dout, Tensor dx) {
        if (dx.rank() != 3) {
            throw new IllegalArgumentException("transposeBackward takes dx (B, M, N), got " + dx);
        }
        mergeHeadsBackward(dout, dx.reshape(dx.dim(0), dx.dim(1), dx.dim(2), 1));
    }

    /**
     * Causal softmax over the last dimension: for row i, att[i, j] = softmax over
     * {@code j <= i} of scale · preatt[i, j], and att[i, j] = 0 for {@code j > i}.
     *
     * @param preatt (B·H, T, T), the attention scores q·kᵀ
     * @param att    (B·H, T, T), overwritten with the probabilities
     * @param scale  the scores' factor, usually 1/√(C/H)
     */
    void causalSoftmaxForward(Tensor preatt, Tensor att, float scale);

    /**
     * Causal softmax for queries that continue a sequence (decoding with a KV cache): in each
     * (Tn, L) block of {@code preatt}, query i sits at absolute position {@code start + i} and sees
     * keys 0 .. start + i, so {@code att[r, i, j]} = softmax over {@code j <= start + i} of
     * scale · preatt[r, i, j], and 0 for {@code j > start + i}. With start = 0 and Tn = L it is
     * {@link #causalSoftmaxForward}. The default reads the scores back to the host, computes there
     * (max-subtracted, exponentials and their sum in fp64, each probability rounded once) and
     * writes att back: a host synchronisation per call, which decoding (one host read of the
     * logits per token anyway) can afford; every backend, CUDA included, runs it so.
     *
     * @param preatt (R, Tn, L) scores q·kᵀ, L ≥ start + Tn
     * @param start  the absolute position of each block's first query, ≥ 0
     * @param scale  the scores' factor, usually 1/√D
     * @param att    (R, Tn, L), overwritten with the probabilities
     * @throws IllegalArgumentException if the shapes disagree or the keys do not reach start + Tn
     */
    default void causalSoftmaxFromForward(Tensor preatt, int start, float scale, Tensor att) {
        if (preatt.rank() != 3 || !java.util.Arrays.equals(preatt.shape(), att.shape())) {
            throw new IllegalArgumentException("causalSoftmaxFromForward takes preatt and att of one shape (R, Tn, L),"
                    + " got " + preatt + " and " + att);
        }
        int tn = Math.toIntExact(preatt.dim(1));
        int l = Math.toIntExact(preatt.dim(2));
        if (start < 0 || start + tn > l) {
            throw new IllegalArgumentException("causalSoftmaxFromForward: queries at positions " + start + " .. "
                    + (start + tn - 1) + " need at least " + (start + tn) + " keys, preatt has " + l);
        }
        float[] x = toHost(preatt);
        float[] y = new float[x.length];
        for (int row = 0; row < x.length / l; row++) {
            int base = row * l;
            int len = start + row % tn + 1;          // query i sees keys 0 .. start + i
            double max = Double.NEGATIVE_INFINITY;
            for (int j = 0; j < len; j++) {
                max = Math.max(max, (double) scale * x[base + j]);
            }
            double sum = 0;
            double[] e = new double[len];
            for (int j = 0; j < len; j++) {
                e[j] = Math.exp((double) scale * x[base + j] - max);
                sum += e[j];
            }
            for (int j = 0; j < len; j++) {
                y[base + j] = (float) (e[j] / sum);
            }
        }
        copyFromHost(y, 0, att);
    }

    /**
     * dpreatt += the gradient of {@link #causalSoftmaxForward} given its output and the output's
     * gradient.
     *
     * @param att     (B·H, T, T), the forward's output
     * @param datt    (B·H, T, T), its gradient
     * @param dpreatt (B·H, T, T), accumulated
     * @param scale   the forward's scale
     */
    void causalSoftmaxBackward(Tensor att, Tensor datt, Tensor dpreatt, float scale);

    /**
     * The shape of {@code att}, what causal attention keeps for its backward, for b sequences of
     * h query heads and T positions in {@code dtype}. By default the probabilities (B, H, T, T),
     * zero above the diagonal, as the composite writes and reads them. A backend that never reads
     * the masked half may keep only the lower triangle: (B, H, T·(T + 1)/2), row i of a head's
     * matrix (its i + 1 probabilities) starting at i·(i + 1)/2 (the CPU backend does for fp32,
     * which its fused attention serves; it also takes the square layout).
     *
     * @param dtype the attention's dtype (q's)
     * @param b     B, the sequences
     * @param h     H, the query heads
     * @param t     T, the positions
     * @return the shape to allocate {@code att} with, for the forward to write and the backward to read
     */
    default long[] causalAttentionSavedShape(DType dtype, long b, long h, long t) {
        return new long[] {b, h, t, t};
    }

    /**
     * Causal attention over head-major heads: att = softmax over {@code j <= i} of
     * scale · q·kᵀ (zero above the diagonal), kept for the backward, and yHeads = att · v. Query
     * heads g·j .. g·j + g − 1 (g = H / Hkv) share key/value head j (grouped-query attention; Hkv = H
     * is multi-head attention). Backend's default issues batched GEMMs and {@link #causalSoftmaxForward};
     * a backend may fuse them (the CPU backend keeps each head's T×T block in cache).
     *
     * @param q      (B, H, T, D)
     * @param k      (B, Hkv, T, D), Hkv dividing H
     * @param v      (B, Hkv, T, D)
     * @param scale  the scores' factor, usually 1/√D
     * @param att    shaped as {@link #causalAttentionSavedShape} gives, overwritten with the probabilities
     * @param yHeads (B, H, T, D), overwritten with att · v
     */
    void causalAttentionForward(Tensor q, Tensor k, Tensor v, float scale, Tensor att, Tensor yHeads);

    /**
     * The gradients of {@link #causalAttentionForward} given its saved probabilities and the
     * gradient of its output; dq, dk and dv are overwritten (dk and dv sum over the query heads
     * that share a key/value head).
     *
     * @param q       (B, H, T, D), the forward's input
     * @param k       (B, Hkv, T, D), the forward's input
     * @param v       (B, Hkv, T, D), the forward's input
     * @param att     the forward's probabilities ({@link #causalAttentionSavedShape})
     * @param dyHeads (B, H, T, D), the gradient of yHeads
     * @param scale   the forward's scale
     * @param dq      (B, H, T, D), overwritten
     * @param dk      (B, Hkv, T, D), overwritten
     * @param dv      (B, Hkv, T, D), overwritten
     */
    void causalAttentionBackward(Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale,
                                 Tensor dq, Tensor dk, Tensor dv);

    /**
     * {@link #causalAttentionForward} straight from a fused projection: q, k and v are read from
     * {@code qkv} as {@link #splitHeads} reads them, and the heads' outputs are written side by side
     * into {@code y} as {@link #mergeHeads} writes them. Backend's default splits, attends and merges; a
     * backend may read and write in place (the CPU backend does: no head-major copies).
     *
     * @param qkv        (B, T, (H + 2·Hkv)·D), per token {@code [q | k | v]}
     * @param numHeads   H, the query heads
     * @param numKvHeads Hkv, the key/value heads, dividing H (H for multi-head attention)
     * @param scale      the scores' factor, usually 1/√D
     * @param att        shaped as {@link #causalAttentionSavedShape} gives, overwritten with the
     *                   probabilities (keep it for the backward)
     * @param y          (B, T, H·D), overwritten
     */
    void causalSelfAttentionForward(Tensor qkv, int numHeads, int numKvHeads, float scale, Tensor att, Tensor y);

    /**
     * The gradient of {@link #causalSelfAttentionForward} with respect to its fused projection.
     *
     * @param qkv        (B, T, (H + 2·Hkv)·D), the forward's input
     * @param att        the forward's probabilities ({@link #causalAttentionSavedShape})
     * @param dy         (B, T, H·D), the gradient of y
     * @param numHeads   H
     * @param numKvHeads Hkv
     * @param scale      the forward's scale
     * @param dqkv       (B, T, (H + 2·Hkv)·D), overwritten
     */
    void causalSelfAttentionBackward(Tensor qkv, Tensor att, Tensor dy, int numHeads, int numKvHeads, float scale,
                                     Tensor dqkv);

    /**
     * Per-row softmax cross-entropy: losses[n] = −log softmax(logits[n])[targets[n]].
     *
     * @param logits  (N, V)
     * @param targets (N) I32 class indices, each in [0, V)
     * @param losses  (N) F32, overwritten
     */
    void crossEntropyForward(Tensor logits, Tensor targets, Tensor losses);

    /**
     * dlogits = (softmax(logits) − onehot(targets)) · dloss, OVERWRITTEN (not accumulated, unlike
     * every other backward), so dlogits may be the same tensor as logits.
     *
     * @param logits  (N, V), the forward's logits
     * @param targets (N) I32, the forward's targets
     * @param dloss   every row's loss gradient (for a mean over N rows scaled by s: s / N)
     * @param dlogits (N, V), overwritten; may be {@code logits}
     */
    void crossEntropyBackward(Tensor logits, Tensor targets, float dloss, Tensor dlogits);

    // ------------------------------------------------------------------ reductions

    /**
     * The sum of every element, accumulated in fp64 where the backend can (at least fp32
     * pairwise). Reads the value back: waits for the work that writes {@code t} (one host
     * synchronisation), so a model's forward and backward do not call it.
     *
     * @param t a floating tensor
     * @return Σ t
     */
    double sum(Tensor t);

    /**
     * out[0] += scale · Σ t, on the device without a host synchronisation: Σ is accumulated as
     * {@link #sum} does and rounded once to out's dtype after scaling. A model's mean loss is
     * written this way.
     *
     * @param t     a floating tensor
     * @param scale the sum's factor (1/N for a mean)
     * @param out   one F32 element, accumulated
     */
    void sumInto(Tensor t, float scale, Tensor out);
}
