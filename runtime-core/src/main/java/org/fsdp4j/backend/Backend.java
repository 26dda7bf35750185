// The operations the model and the FSDP engine need from a device, and nothing more. One
// instance per (rank, device): it owns that rank's memory tracker and its streams. The CPU
// backend is the reference every other backend is tested against.
//
// Conventions for every operation below:
// - Tensors are dense and row-major; shapes are checked, and a mismatch is an
//   IllegalArgumentException that names the operation and the shapes.
// - Floating inputs may be F32, F16 or BF16 unless a parameter says "F32"; arithmetic is fp32
//   (fp64 for the reductions that say so); results are rounded to the output's dtype (RNE).
// - Backward operations ACCUMULATE (+=) into every gradient they write, as llm.c does, so one
//   zero-fill per buffer serves several contributions. crossEntropyBackward and ropeBackward are
//   the exceptions (they overwrite, so the gradient may alias its input, in place).
// - Work is issued on the calling thread's current stream (see setStream / onStream) and the
//   call returns without waiting for it, as on a GPU: the CPU backend models one (see
//   docs/ARCHITECTURE.md, "Streams and events"). Shapes and closed tensors are checked when the
//   call is made. Work crosses streams only through events (Stream.record / Stream.waitFor).
// - Memory is stream-ordered, as CUDA's caching allocator: a tensor is allocated for the
//   current stream and may be closed by the host as soon as the last work that reads it is
//   issued on that stream; another stream that uses it must either be ordered before that
//   stream's later work by an event, or be named with recordStream.
// - The calls that hand a value to the host (copyToHost, sum, sumOfSquares, hasNonFinite,
//   synchronize, Stream.synchronize, Event.synchronize) block until the work they depend on is
//   done; each counts as one host synchronisation (hostSyncs). Everything else never blocks the
//   host on a GPU.
package org.fsdp4j.backend;

import java.util.OptionalDouble;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Tensor;

public interface Backend extends AutoCloseable {

    /** Short name for logs: "cpu (OpenBLAS Haswell, 2 threads)", "cuda:0 (NVIDIA H200)". */
    String name();

    Device device();

    /** The tracker every allocation of this backend reports to. */
    MemoryTracker memory();

    /**
     * The device's dense peak for GEMMs with {@code operands}-typed inputs and fp32 accumulation,
     * in TFLOP/s, for reporting achieved throughput as a share of it (bench gemm, MFU); empty
     * where the backend does not know it (the default).
     */
    default OptionalDouble peakTflops(DType operands) {
        return OptionalDouble.empty();
    }

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

    /** out = SiLU(gate) · up (SwiGLU's gated unit), SiLU(x) = x · σ(x); out may alias gate or up. */
    void swigluForward(Tensor gate, Tensor up, Tensor out);

    /** dgate += dout · up · SiLU'(gate), dup += dout · SiLU(gate), with SiLU'(x) = σ(x)(1 + x(1 − σ(x))). */
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
     * RMSNorm over the last dim: out = inp · rstd · weight with rstd = 1 / √(mean(inp²) + eps).
     * inp, out (N, C); weight (C); rstd (N) F32, written for the backward.
     */
    void rmsNormForward(Tensor inp, Tensor weight, Tensor out, Tensor rstd, float eps);

    /** Accumulates dinp (N, C) and dweight (C) from dout (N, C) and the saved rstd. */
    void rmsNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp, Tensor dweight);

    /**
     * out (B, T, C) = wte[tokens[b,t]] + wpe[t]; tokens (B, T) I32, wte (V, C), wpe (maxT ≥ T, C),
     * or null for no position embedding (out = wte[tokens]: a model with rotary positions).
     */
    void embeddingForward(Tensor tokens, Tensor wte, Tensor wpe, Tensor out);

    /** dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += Σ_b dout[b,t] (dwpe null: none). Deterministic order. */
    void embeddingBackward(Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe);

    /**
     * qkv (B, T, (H + 2·Hkv)·D) laid out [q | k | v] per token → q (B, H, T, D) and k, v (B, Hkv, T, D),
     * numHeads = H; Hkv is k's and v's head count (H for multi-head attention, fewer for grouped-query).
     */
    void splitHeads(Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads);

    /** dqkv (B, T, (H + 2·Hkv)·D) += the inverse of splitHeads applied to dq (B, H, T, D), dk, dv (B, Hkv, T, D). */
    void splitHeadsBackward(Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads);

    /**
     * Rotary position embedding over head-major inp (B, H, T, D), D even, in the half-split
     * (GPT-NeoX, Hugging Face rotate_half) convention: for i &lt; D/2 the pair (x_i, x_{i+D/2}) of
     * position t turns by the angle whose cosine and sine are cos[t, i], sin[t, i] (F32 tables
     * (≥ T, D/2)): out_i = x_i·cos − x_{i+D/2}·sin, out_{i+D/2} = x_{i+D/2}·cos + x_i·sin. out may be inp.
     */
    void ropeForward(Tensor inp, Tensor cos, Tensor sin, Tensor out);

    /**
     * dinp = the inverse rotation of dout (the rotation is orthogonal: its transpose turns by −angle),
     * OVERWRITTEN (not accumulated); dinp may be dout, in place.
     */
    void ropeBackward(Tensor dout, Tensor cos, Tensor sin, Tensor dinp);

    /** out (B, T, C) = y (B, H, T, C/H) with the heads put back side by side. */
    void mergeHeads(Tensor y, Tensor out);

    /** dy (B, H, T, C/H) += the inverse of mergeHeads applied to dout (B, T, C). */
    void mergeHeadsBackward(Tensor dout, Tensor dy);

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

    // ------------------------------------------------------------------ optimizer and reductions

    /**
     * One AdamW step on a flat F32 buffer: g = gradScale · grad; m = β1 m + (1−β1) g;
     * v = β2 v + (1−β2) g²; p −= lr · (m̂ / (√v̂ + eps) + weightDecay · p), with
     * m̂ = m / (1 − β1^t), v̂ = v / (1 − β2^t). param, m, v F32; grad any float dtype.
     */
    void adamW(Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep step);

    /** SGD with momentum: g = gradScale·grad + wd·p; buf = momentum·buf + g; p −= lr·buf. */
    void sgdMomentum(Tensor param, Tensor grad, Tensor momentumBuf, float lr, float momentum,
                     float weightDecay, float gradScale);

    /** Σ x² accumulated in fp64 where the backend can (at least fp32 pairwise). */
    double sumOfSquares(Tensor t);

    /** Σ x, accumulated as sumOfSquares is. */
    double sum(Tensor t);

    /** True if any element is ±inf or NaN. */
    boolean hasNonFinite(Tensor t);

    /**
     * out[0] += scale · Σ t, on the device (no host synchronisation): Σ is accumulated as sum()
     * does and rounded once to out's dtype after scaling. out is one F32 element.
     */
    void sumInto(Tensor t, float scale, Tensor out);

    /** out[0] += scale · Σ t², accumulated and rounded as sumInto. */
    void sumOfSquaresInto(Tensor t, float scale, Tensor out);

    // ------------------------------------------------------------------ streams and events

    /** The stream every thread issues on until setStream says otherwise: the forward/backward compute. */
    Stream computeStream();

    /** A new named stream (its name says why it exists: "all-gather", "reduce-scatter"). */
    Stream newStream(String name);

    /** Makes {@code stream} the calling thread's current stream for this backend (null: the compute stream). */
    void setStream(Stream stream);

    /** The calling thread's current stream. */
    Stream currentStream();

    /** Issues on {@code stream} until the returned scope is closed, then on the previous stream again. */
    default StreamScope onStream(Stream stream) {
        Stream previous = currentStream();
        setStream(stream);
        return () -> setStream(previous);
    }

    /**
     * Tells the allocator that {@code stream} uses {@code t}, which was allocated for another
     * stream: when t is closed, its bytes are not reused until the work {@code stream} has been
     * given by then is done (torch's record_stream). No stream waits for another because of it.
     */
    void recordStream(Tensor t, Stream stream);

    /** Blocks the host until all work this backend issued on any stream is done (a host synchronisation). */
    void synchronize();

    /** Host synchronisations so far (see the class comment): the step's budget is one. */
    long hostSyncs();

    /**
     * GEMMs so far whose operands had different dtypes (e.g. fp32 activations × bf16 weights),
     * each of which the CUDA backend serves by promoting its operands to fp32 with a copy (the CPU
     * converts while packing either way). Zero when compute runs in the parameter dtype.
     */
    long promotedCopies();

    /** Frees what the backend holds itself (pools, handles); tensors it handed out are the caller's. */
    @Override
    void close();

    /** Restores the previous current stream when closed (see onStream). */
    interface StreamScope extends AutoCloseable {
        @Override
        void close();
    }

    /**
     * A sequence of work that runs in issue order. Closing one waits for its work and destroys it;
     * using it afterwards throws.
     */
    interface Stream extends AutoCloseable {
        String name();

        /** An event that completes when the work issued on this stream so far is done. */
        Event record();

        /** Work issued on this stream from now on runs after {@code event}; never blocks the host. */
        void waitFor(Event event);

        /**
         * Runs {@code fn} on the host in stream order (after the work before it; the work after it
         * waits for it), like cudaLaunchHostFunc: it must not issue work on this backend itself.
         * A failure of fn fails the stream: later work on it is skipped and its events fail.
         */
        void launchHostFunc(Runnable fn);

        /** Blocks the host until the work issued so far is done (a host synchronisation); rethrows its failure. */
        void synchronize();

        @Override
        void close();
    }

    /** A point in a stream's work: waitable by other streams, and by the host. */
    interface Event {
        /** Blocks the host until the work before the event is done (a host synchronisation); rethrows its failure. */
        void synchronize();

        /** True once the work before the event is done (successfully or not); never blocks. */
        boolean isDone();

        /**
         * Blocks the calling thread until the work before the event is done, without counting a
         * host synchronisation: how a stream of another backend (a CPU stream waiting for a GPU,
         * or a GPU stream's host function waiting for the CPU) waits for it in its own order.
         */
        void block();
    }
}
