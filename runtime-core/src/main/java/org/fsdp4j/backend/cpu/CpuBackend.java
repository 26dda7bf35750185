// The reference backend: host memory from its CpuAllocator, GEMMs through OpenBLAS, every other
// op in plain Java on a ForkJoinPool of cpuThreads threads (the op classes of this package hold
// the math). It runs asynchronously, as a GPU does (docs/ARCHITECTURE.md, "Streams and events"):
// an op is checked when it is called, then run in order on the calling thread's current stream
// (CpuStream), and the call returns. The compute stream runs inline on the issuing thread unless
// the debug mode is on; every other stream has a worker thread. An op called from inside a
// stream's work (a host function, as the in-process communicator's collectives are) runs at once
// on that thread: it is already in stream order.
//
// Threads: several CPU backends (one per in-process rank) may live in one JVM, each created
// with cpuThreads = cores / N and each with its own pool of that many threads. OpenBLAS is set
// to one thread (a process-wide setting) and called from those pools, tile by tile (GemmOp),
// so N ranks never run more than N × cpuThreads threads for compute, and results do not depend
// on the thread count.
package org.fsdp4j.backend.cpu;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.OpTiming;
import org.fsdp4j.backend.Shapes;

public final class CpuBackend implements Backend {

    /** Under the debug mode each piece of stream work first waits a random moment up to this long (see CpuStream). */
    static final long DEBUG_MAX_DELAY_NANOS = 5_000_000;

    private final MemoryTracker tracker;
    private final CpuThreads threads;
    private final boolean debugStreams;
    private final String memoryKind;          // "pinned" for page-locked memory, null for plain
    private final AtomicLong hostSyncs = new AtomicLong();
    private final AtomicLong promotedCopies = new AtomicLong();
    private final CpuAllocator allocator;
    private final HostBlocks blocks;            // where the allocator and shared buffers get memory
    private final CpuStream compute;
    private final List<CpuStream> streams = new ArrayList<>();     // every open stream, compute first
    private final ThreadLocal<CpuStream> current;
    private volatile boolean closed;

    /**
     * {@code cpuThreads} ≥ 1; the provider resolves 0 to all cores. With {@code debugStreams}
     * every stream (compute too) runs on its own worker with random delays, and freed memory is
     * poisoned before reuse, so that work ordered by no event shows up as a wrong result. Loads
     * OpenBLAS.
     */
    public CpuBackend(MemoryTracker tracker, int cpuThreads, boolean debugStreams) {
        this(tracker, cpuThreads, debugStreams, HostBlocks.MALLOC);
    }

    /** As above, its memory from {@code blocks} (page-locked memory for the host of a GPU). */
    public CpuBackend(MemoryTracker tracker, int cpuThreads, boolean debugStreams, HostBlocks blocks) {
        this.tracker = Objects.requireNonNull(tracker, "tracker");
        VectorModule.require();
        CpuKernelChoice.check();
        JitDirectives.installOnce();
        OpenBlas.load();
        OpenBlas.useCallerThreadOnly();
        this.threads = new CpuThreads(cpuThreads);
        this.debugStreams = debugStreams;
        this.memoryKind = blocks.name();
        this.allocator = new CpuAllocator(debugStreams, blocks);
        this.blocks = blocks;
        this.compute = open("compute", !debugStreams);
        this.current = ThreadLocal.withInitial(() -> compute);
    }

    public CpuBackend(MemoryTracker tracker, int cpuThreads) {
        this(tracker, cpuThreads, false);
    }

    @Override
    public String name() {
        return "cpu (" + CpuKernelChoice.gemmWords() + ", " + threads.threads()
                + (threads.threads() == 1 ? " thread" : " threads") + (memoryKind == null ? "" : ", " + memoryKind + " memory")
                + (debugStreams ? ", debug streams" : "") + ")";
    }

    @Override
    public Device device() {
        return Device.CPU;
    }

    @Override
    public MemoryTracker memory() {
        return tracker;
    }

    /** Whether this backend runs every stream on a worker with random delays and poisons freed memory. */
    public boolean debugStreams() {
        return debugStreams;
    }

    // ------------------------------------------------------------------ memory

    @Override
    public Tensor allocate(DType dtype, MemoryCategory category, long... shape) {
        checkOpen();
        long numBytes = Math.multiplyExact(Tensor.numelOf(shape), dtype.byteSize());
        return Tensor.owning(CpuStorage.allocate(numBytes, category, tracker, allocator, stream()), dtype, shape);
    }

    @Override
    public Tensor allocateShared(DType dtype, MemoryCategory category, List<MemoryTracker> charged, long... shape) {
        checkOpen();
        long numBytes = Math.multiplyExact(Tensor.numelOf(shape), dtype.byteSize());
        return Tensor.owning(CpuStorage.allocateShared(numBytes, category, charged, blocks, debugStreams), dtype, shape);
    }

    @Override
    public Tensor overMapping(java.nio.ByteBuffer mapping, Runnable release, DType dtype, MemoryCategory category,
                              List<MemoryTracker> charged, int parts, long... shape) {
        return CpuStorage.overMapping(mapping, release, dtype, category, charged, parts, shape);
    }

    @Override
    public java.nio.ByteBuffer hostBytes(Tensor t) {
        return CpuStorage.byteView(t);
    }

    @Override
    public void recordStream(Tensor t, Stream stream) {
        CpuStorage.checkIssue("recordStream", t);
        CpuStorage.of(t).recordStream(own(stream, "recordStream"));
    }

    @Override
    public void fill(Tensor t, float value) {
        issue("fill", () -> ElementwiseOps.fill(threads, t, value), t);
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        checkOpen();
        Shapes.sameNumel("copy", src, dst);
        if (src.dtype() != dst.dtype() && (!src.dtype().isFloating() || !dst.dtype().isFloating())) {
            throw Shapes.error("copy", "int32 tensors copy only to int32", src, dst);
        }
        issue("copy", () -> ElementwiseOps.copy(threads, src, dst), src, dst);
    }

    @Override
    public void copyFromHost(float[] src, int srcOffset, Tensor dst) {
        checkOpen();
        Shapes.hostRange("copyFromHost", src.length, srcOffset, dst);
        Shapes.floating("copyFromHost", dst);
        float[] from = snapshot(src, srcOffset, (int) dst.numel());
        int at = from == src ? srcOffset : 0;
        issue("copyFromHost", () -> {
            Elements e = Elements.of(dst);
            threads.forChunks(dst.numel(), ElementwiseOps.GRAIN,
                    (c, lo, hi) -> e.store(from, at + (int) lo, lo, (int) (hi - lo)));
        }, dst);
    }

    @Override
    public void copyFromHost(int[] src, int srcOffset, Tensor dst) {
        checkOpen();
        Shapes.hostRange("copyFromHost", src.length, srcOffset, dst);
        Shapes.dtype("copyFromHost", DType.I32, dst);
        int n = (int) dst.numel();
        int[] from = stream().isInline() || CpuStream.inStreamWork() ? src
                : java.util.Arrays.copyOfRange(src, srcOffset, srcOffset + n);
        int at = from == src ? srcOffset : 0;
        issue("copyFromHost", () -> Elements.of(dst).storeInts(from, at, 0, n), dst);
    }

    @Override
    public void copyToHost(Tensor src, float[] dst, int dstOffset) {
        checkOpen();
        Shapes.hostRange("copyToHost", dst.length, dstOffset, src);
        Shapes.floating("copyToHost", src);
        read("copyToHost", () -> {
            Elements e = Elements.of(src);
            threads.forChunks(src.numel(), ElementwiseOps.GRAIN,
                    (c, from, to) -> e.load(from, dst, dstOffset + (int) from, (int) (to - from)));
            return null;
        }, src);
    }

    @Override
    public void copyToHost(Tensor src, int[] dst, int dstOffset) {
        checkOpen();
        Shapes.hostRange("copyToHost", dst.length, dstOffset, src);
        Shapes.dtype("copyToHost", DType.I32, src);
        read("copyToHost", () -> {
            Elements.of(src).loadInts(0, dst, dstOffset, (int) src.numel());
            return null;
        }, src);
    }

    /** The host data a queued copy will read: the caller's array itself when the copy runs now, else a copy of the range. */
    private float[] snapshot(float[] src, int offset, int n) {
        return stream().isInline() || CpuStream.inStreamWork() ? src : java.util.Arrays.copyOfRange(src, offset, offset + n);
    }

    // ------------------------------------------------------------------ GEMM

    @Override
    public void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch) {
        checkOpen();
        Shapes.gemm(transA, transB, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC, batch);
        if (a.dtype() != b.dtype() || (c.dtype() != DType.F32 && c.dtype() != a.dtype())) {
            promotedCopies.incrementAndGet();
        }
        String timeKey = OpTimes.ENABLED ? OpTiming.gemmKey(transA, transB, m, n, k, batch,
                a.dtype() + "," + b.dtype() + "->" + c.dtype()) : "gemm";
        issue("gemm", timeKey, 2L * m * n * k * batch, () -> GemmOp.gemm(threads, transA, transB, m, n, k, alpha,
                a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC, batch, null), a, b, c);
    }

    // The fused Linear ops: fp32 products apply their epilogue (GemmEpilogue) to C's rows as they
    // are written (PanelGemm) or right after each OpenBLAS tile (GemmOp), with the bits of the
    // unfused ops; other dtypes take the defaults.

    @Override
    public void gemmThenAddBias(boolean transA, boolean transB, int m, int n, int k, Tensor a, Tensor b, Tensor c,
                                Tensor bias) {
        checkOpen();
        if (!fusable(m, n, k, a, b, c, bias)) {
            Backend.super.gemmThenAddBias(transA, transB, m, n, k, a, b, c, bias);
            return;
        }
        Shapes.bias("gemmThenAddBias", c.reshape(m, n), bias);
        gemmWithEpilogue(" +bias", transA, transB, m, n, k, a, b, c,
                () -> GemmEpilogue.bias(Elements.of(bias).loadAll()), bias);
    }

    @Override
    public void gemmThenAddBiasGelu(boolean transA, boolean transB, int m, int n, int k, Tensor a, Tensor b,
                                    Tensor pre, Tensor bias, Tensor out) {
        checkOpen();
        if (!fusable(m, n, k, a, b, pre, bias, out)) {
            Backend.super.gemmThenAddBiasGelu(transA, transB, m, n, k, a, b, pre, bias, out);
            return;
        }
        Shapes.bias("gemmThenAddBiasGelu", pre.reshape(m, n), bias);
        Shapes.pointwise("gemmThenAddBiasGelu", pre, out);
        gemmWithEpilogue(" +bias+gelu", transA, transB, m, n, k, a, b, pre, () -> GemmEpilogue.biasGelu(
                Elements.of(bias).loadAll(), CpuStorage.of(out).floats(), out.offset() - pre.offset()), bias, out);
    }

    @Override
    public void gemmThenGeluBackward(boolean transA, boolean transB, int m, int n, int k, Tensor a, Tensor b,
                                     Tensor pre, Tensor dpre) {
        checkOpen();
        if (!fusable(m, n, k, a, b, pre, dpre)) {
            Backend.super.gemmThenGeluBackward(transA, transB, m, n, k, a, b, pre, dpre);
            return;
        }
        Shapes.pointwise("gemmThenGeluBackward", pre, dpre);
        gemmWithEpilogue(" +gelu'", transA, transB, m, n, k, a, b, dpre, () -> GemmEpilogue.geluGradient(
                CpuStorage.of(pre).floats(), pre.offset() - dpre.offset()), pre);
    }

    /**
     * Issues C (m×n) = op(A) · op(B) through the epilogue {@code epilogue} makes (on the stream, when
     * the op runs); {@code others} are the epilogue's tensors. Its op-time key is the GEMM's plus
     * {@code suffix}.
     */
    private void gemmWithEpilogue(String suffix, boolean transA, boolean transB, int m, int n, int k, Tensor a,
                                  Tensor b, Tensor c, java.util.function.Supplier<GemmEpilogue> epilogue,
                                  Tensor... others) {
        int lda = transA ? m : k;
        int ldb = transB ? k : n;
        Shapes.gemm(transA, transB, m, n, k, a, lda, 0, b, ldb, 0, c, n, 0, 1);
        String timeKey = OpTimes.ENABLED ? OpTiming.gemmKey(transA, transB, m, n, k, 1, "F32,F32->F32") + suffix : "gemm";
        Tensor[] touched = new Tensor[3 + others.length];
        touched[0] = a;
        touched[1] = b;
        touched[2] = c;
        System.arraycopy(others, 0, touched, 3, others.length);
        issue("gemm", timeKey, 2L * m * n * k, () -> GemmOp.gemm(threads, transA, transB, m, n, k, 1f,
                a, lda, 0, b, ldb, 0, 0f, c, n, 0, 1, epilogue.get()), touched);
    }

    /** Whether an m×n×k product over these tensors runs with an epilogue: all fp32. */
    private static boolean fusable(int m, int n, int k, Tensor... tensors) {
        for (Tensor t : tensors) {
            if (t.dtype() != DType.F32) {
                return false;
            }
        }
        return true;
    }

    // ------------------------------------------------------------------ elementwise

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        checkOpen();
        Shapes.pointwise("add", a, b, out);
        issue("add", () -> ElementwiseOps.add(threads, a, b, out), a, b, out);
    }

    @Override
    public void addScaled(Tensor a, Tensor b, float alpha, Tensor out) {
        checkOpen();
        Shapes.pointwise("addScaled", a, b, out);
        if (out.dtype() != DType.F32) {   // the sum must round to out's dtype before the product
            Backend.super.addScaled(a, b, alpha, out);
            return;
        }
        issue("addScaled", () -> ElementwiseOps.addScaled(threads, a, b, alpha, out), a, b, out);
    }

    @Override
    public void scale(Tensor t, float alpha) {
        checkOpen();
        Shapes.floating("scale", t);
        issue("scale", () -> ElementwiseOps.scale(threads, t, alpha), t);
    }

    @Override
    public void addBias(Tensor out, Tensor bias) {
        checkOpen();
        Shapes.bias("addBias", out, bias);
        issue("addBias", () -> ElementwiseOps.addBias(threads, out, bias), out, bias);
    }

    @Override
    public void biasBackward(Tensor dout, Tensor dbias) {
        checkOpen();
        Shapes.bias("biasBackward", dout, dbias);
        issue("biasBackward", () -> ElementwiseOps.biasBackward(threads, dout, dbias), dout, dbias);
    }

    @Override
    public void geluForward(Tensor inp, Tensor out) {
        checkOpen();
        Shapes.pointwise("geluForward", inp, out);
        issue("geluForward", () -> ElementwiseOps.geluForward(threads, inp, out), inp, out);
    }

    @Override
    public void geluBackward(Tensor inp, Tensor dout, Tensor dinp) {
        checkOpen();
        Shapes.pointwise("geluBackward", inp, dout, dinp);
        issue("geluBackward", () -> ElementwiseOps.geluBackward(threads, inp, dout, dinp), inp, dout, dinp);
    }

    @Override
    public void swigluForward(Tensor gate, Tensor up, Tensor out) {
        checkOpen();
        Shapes.pointwise("swigluForward", gate, up, out);
        issue("swigluForward", () -> ElementwiseOps.swigluForward(threads, gate, up, out), gate, up, out);
    }

    @Override
    public void swigluBackward(Tensor gate, Tensor up, Tensor dout, Tensor dgate, Tensor dup) {
        checkOpen();
        Shapes.pointwise("swigluBackward", gate, up, dout, dgate, dup);
        issue("swigluBackward", () -> ElementwiseOps.swigluBackward(threads, gate, up, dout, dgate, dup),
                gate, up, dout, dgate, dup);
    }

    // ------------------------------------------------------------------ layers

    @Override
    public void layerNormForward(Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd) {
        checkOpen();
        Shapes.layerNorm("layerNormForward", inp, weight, bias, out, mean, rstd);
        issue("layerNormForward", () -> LayerNormOps.forward(threads, inp, weight, bias, out, mean, rstd),
                inp, weight, bias, out, mean, rstd);
    }

    @Override
    public void layerNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                                  Tensor dinp, Tensor dweight, Tensor dbias) {
        checkOpen();
        Shapes.layerNormBackward(dout, inp, weight, mean, rstd, dinp, dweight, dbias);
        issue("layerNormBackward", () -> LayerNormOps.backward(threads, dout, inp, weight, mean, rstd, dinp, dweight,
                dbias), dout, inp, weight, mean, rstd, dinp, dweight, dbias);
    }

    @Override
    public void rmsNormForward(Tensor inp, Tensor weight, Tensor out, Tensor rstd, float eps) {
        checkOpen();
        Shapes.rmsNorm("rmsNormForward", inp, weight, out, rstd, eps);
        issue("rmsNormForward", () -> RmsNormOps.forward(threads, inp, weight, out, rstd, eps), inp, weight, out, rstd);
    }

    @Override
    public void rmsNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp, Tensor dweight) {
        checkOpen();
        Shapes.rmsNormBackward(dout, inp, weight, rstd, dinp, dweight);
        issue("rmsNormBackward", () -> RmsNormOps.backward(threads, dout, inp, weight, rstd, dinp, dweight),
                dout, inp, weight, rstd, dinp, dweight);
    }

    @Override
    public void embeddingForward(Tensor tokens, Tensor wte, Tensor wpe, Tensor out) {
        checkOpen();
        Shapes.embedding("embeddingForward", tokens, wte, wpe, out);
        issue("embeddingForward", () -> EmbeddingOps.forward(threads, tokens, wte, wpe, out), tokens, wte, wpe, out);
    }

    @Override
    public void embeddingBackward(Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe) {
        checkOpen();
        Shapes.embedding("embeddingBackward", tokens, dwte, dwpe, dout);
        issue("embeddingBackward", () -> EmbeddingOps.backward(threads, tokens, dout, dwte, dwpe),
                tokens, dout, dwte, dwpe);
    }

    @Override
    public void splitHeads(Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads) {
        checkOpen();
        Shapes.splitHeads("splitHeads", qkv, q, k, v, numHeads);
        issue("splitHeads", () -> AttentionOps.splitHeads(threads, qkv, q, k, v, numHeads), qkv, q, k, v);
    }

    @Override
    public void splitHeadsBackward(Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads) {
        checkOpen();
        Shapes.splitHeads("splitHeadsBackward", dqkv, dq, dk, dv, numHeads);
        issue("splitHeadsBackward", () -> AttentionOps.splitHeadsBackward(threads, dq, dk, dv, dqkv, numHeads),
                dq, dk, dv, dqkv);
    }

    @Override
    public void ropeForward(Tensor inp, Tensor cos, Tensor sin, Tensor out) {
        checkOpen();
        Shapes.rope("ropeForward", inp, cos, sin, out);
        issue("ropeForward", () -> AttentionOps.rope(threads, "ropeForward", inp, cos, sin, out, 1f), inp, cos, sin, out);
    }

    @Override
    public void ropeBackward(Tensor dout, Tensor cos, Tensor sin, Tensor dinp) {
        checkOpen();
        Shapes.rope("ropeBackward", dout, cos, sin, dinp);
        issue("ropeBackward", () -> AttentionOps.rope(threads, "ropeBackward", dout, cos, sin, dinp, -1f),
                dout, cos, sin, dinp);
    }

    @Override
    public void mergeHeads(Tensor y, Tensor out) {
        checkOpen();
        Shapes.mergeHeads("mergeHeads", y, out);
        issue("mergeHeads", () -> AttentionOps.mergeHeads(threads, y, out), y, out);
    }

    @Override
    public void mergeHeadsBackward(Tensor dout, Tensor dy) {
        checkOpen();
        Shapes.mergeHeads("mergeHeadsBackward", dy, dout);
        issue("mergeHeadsBackward", () -> AttentionOps.mergeHeadsBackward(threads, dout, dy), dout, dy);
    }

    /**
     * Whether this backend keeps causal attention's probabilities as the lower triangle (B, H,
     * T·(T + 1)/2) for {@code dtype}: in fp32, which the fused attention serves (half the square's
     * bytes, none written for the masked half); other dtypes take the composite, which reads the
     * square. Public for the planner, which counts activations without a backend.
     */
    public static boolean keepsAttentionTriangle(DType dtype) {
        return dtype == DType.F32;
    }

    @Override
    public long[] causalAttentionSavedShape(DType dtype, long b, long h, long t) {
        return keepsAttentionTriangle(dtype) ? new long[] {b, h, Shapes.lowerTriangle(t)}
                : Backend.super.causalAttentionSavedShape(dtype, b, h, t);
    }

    @Override
    public void causalAttentionForward(Tensor q, Tensor k, Tensor v, float scale, Tensor att, Tensor yHeads) {
        checkOpen();
        if (!FusedAttentionOps.applies(q, k, v, att, yHeads)) {
            Backend.super.causalAttentionForward(q, k, v, scale, att, yHeads);
            return;
        }
        Shapes.AttentionSizes s = Shapes.attention("causalAttentionForward", true, q, k, v, att, new Tensor[] {yHeads});
        long flops = 4L * s.b() * s.h() * s.t() * s.t() * s.d();
        issue("causalAttentionForward", "causalAttentionForward", flops,
                () -> FusedAttentionOps.forward(threads, s, q, k, v, scale, att, yHeads), q, k, v, att, yHeads);
    }

    @Override
    public void causalAttentionBackward(Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale,
                                        Tensor dq, Tensor dk, Tensor dv) {
        checkOpen();
        if (!FusedAttentionOps.applies(q, k, v, att, dyHeads, dq, dk, dv)) {
            Backend.super.causalAttentionBackward(q, k, v, att, dyHeads, scale, dq, dk, dv);
            return;
        }
        Shapes.AttentionSizes s = Shapes.attention("causalAttentionBackward", true, q, k, v, att, new Tensor[] {dyHeads, dq},
                dk, dv);
        long flops = 8L * s.b() * s.h() * s.t() * s.t() * s.d();
        issue("causalAttentionBackward", "causalAttentionBackward", flops,
                () -> FusedAttentionOps.backward(threads, s, q, k, v, att, dyHeads, scale, dq, dk, dv),
                q, k, v, att, dyHeads, dq, dk, dv);
    }

    @Override
    public void causalSelfAttentionForward(Tensor qkv, int numHeads, int numKvHeads, float scale, Tensor att,
                                           Tensor y) {
        checkOpen();
        if (!FusedAttentionOps.applies(qkv, att, y)) {
            Backend.super.causalSelfAttentionForward(qkv, numHeads, numKvHeads, scale, att, y);
            return;
        }
        Shapes.AttentionSizes s = Shapes.selfAttention("causalSelfAttentionForward", true, qkv, numHeads, numKvHeads, att, y);
        long flops = 4L * s.b() * s.h() * s.t() * s.t() * s.d();
        issue("causalSelfAttentionForward", "causalSelfAttentionForward", flops,
                () -> FusedAttentionOps.packedForward(threads, s, qkv, scale, att, y), qkv, att, y);
    }

    @Override
    public void causalSelfAttentionBackward(Tensor qkv, Tensor att, Tensor dy, int numHeads, int numKvHeads,
                                            float scale, Tensor dqkv) {
        checkOpen();
        if (!FusedAttentionOps.applies(qkv, att, dy, dqkv)) {
            Backend.super.causalSelfAttentionBackward(qkv, att, dy, numHeads, numKvHeads, scale, dqkv);
            return;
        }
        Shapes.AttentionSizes s = Shapes.selfAttention("causalSelfAttentionBackward", true, qkv, numHeads, numKvHeads, att,
                dy, dqkv);
        long flops = 8L * s.b() * s.h() * s.t() * s.t() * s.d();
        issue("causalSelfAttentionBackward", "causalSelfAttentionBackward", flops,
                () -> FusedAttentionOps.packedBackward(threads, s, qkv, att, dy, scale, dqkv),
                qkv, att, dy, dqkv);
    }

    @Override
    public void causalSoftmaxForward(Tensor preatt, Tensor att, float scale) {
        checkOpen();
        Shapes.causalSoftmax("causalSoftmaxForward", preatt, att);
        issue("causalSoftmaxForward", () -> AttentionOps.causalSoftmaxForward(threads, preatt, att, scale), preatt, att);
    }

    @Override
    public void causalSoftmaxBackward(Tensor att, Tensor datt, Tensor dpreatt, float scale) {
        checkOpen();
        Shapes.causalSoftmax("causalSoftmaxBackward", att, datt, dpreatt);
        issue("causalSoftmaxBackward", () -> AttentionOps.causalSoftmaxBackward(threads, att, datt, dpreatt, scale),
                att, datt, dpreatt);
    }

    @Override
    public void crossEntropyForward(Tensor logits, Tensor targets, Tensor losses) {
        checkOpen();
        Shapes.crossEntropyForward(logits, targets, losses);
        issue("crossEntropyForward", () -> CrossEntropyOps.forward(threads, logits, targets, losses),
                logits, targets, losses);
    }

    @Override
    public void crossEntropyBackward(Tensor logits, Tensor targets, float dloss, Tensor dlogits) {
        checkOpen();
        Shapes.crossEntropyBackward(logits, targets, dlogits);
        issue("crossEntropyBackward", () -> CrossEntropyOps.backward(threads, logits, targets, dloss, dlogits),
                logits, targets, dlogits);
    }

    // ------------------------------------------------------------------ optimizer and reductions

    @Override
    public void adamW(Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep step) {
        checkOpen();
        Shapes.optimizer("adamW", param, grad, m, v);
        issue("adamW", () -> OptimizerOps.adamW(threads, param, grad, m, v, step), param, grad, m, v);
    }

    @Override
    public void sgdMomentum(Tensor param, Tensor grad, Tensor momentumBuf, float lr, float momentum,
                            float weightDecay, float gradScale) {
        checkOpen();
        Shapes.optimizer("sgdMomentum", param, grad, momentumBuf);
        issue("sgdMomentum", () -> OptimizerOps.sgdMomentum(threads, param, grad, momentumBuf, lr, momentum,
                weightDecay, gradScale), param, grad, momentumBuf);
    }

    @Override
    public double sumOfSquares(Tensor t) {
        checkOpen();
        Shapes.floating("sumOfSquares", t);
        return read("sumOfSquares", () -> ReductionOps.sumOfSquares(threads, t), t);
    }

    @Override
    public double sum(Tensor t) {
        checkOpen();
        Shapes.floating("sum", t);
        return read("sum", () -> ReductionOps.sum(threads, t), t);
    }

    @Override
    public boolean hasNonFinite(Tensor t) {
        checkOpen();
        Shapes.floating("hasNonFinite", t);
        return read("hasNonFinite", () -> ReductionOps.hasNonFinite(threads, t), t);
    }

    @Override
    public void sumInto(Tensor t, float scale, Tensor out) {
        checkOpen();
        Shapes.floating("sumInto", t);
        Shapes.scalarF32("sumInto", out);
        issue("sumInto", () -> ReductionOps.addInto(out, scale * ReductionOps.sum(threads, t)), t, out);
    }

    @Override
    public void sumOfSquaresInto(Tensor t, float scale, Tensor out) {
        checkOpen();
        Shapes.floating("sumOfSquaresInto", t);
        Shapes.scalarF32("sumOfSquaresInto", out);
        issue("sumOfSquaresInto", () -> ReductionOps.addInto(out, scale * ReductionOps.sumOfSquares(threads, t)), t, out);
    }

    // ------------------------------------------------------------------ streams and events

    @Override
    public Stream computeStream() {
        return compute;
    }

    @Override
    public Stream newStream(String name) {
        checkOpen();
        return open(Objects.requireNonNull(name, "stream name"), false);
    }

    @Override
    public void setStream(Stream stream) {
        current.set(stream == null ? compute : own(stream, "setStream"));
    }

    @Override
    public Stream currentStream() {
        return stream();
    }

    @Override
    public void synchronize() {
        hostSyncs.incrementAndGet();
        for (CpuStream s : openStreams()) {
            s.awaitIdle();
        }
    }

    @Override
    public long hostSyncs() {
        return hostSyncs.get();
    }

    @Override
    public long promotedCopies() {
        return promotedCopies.get();
    }

    /** Lets every stream finish its queued work, stops the workers, then frees the cached memory. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (CpuStream s : openStreams()) {
            s.close();
        }
        allocator.close();
        threads.close();
    }

    @Override
    public String toString() {
        return name();
    }

    // ------------------------------------------------------------------ machinery

    private CpuStream open(String name, boolean inline) {
        CpuStream s = new ManagedStream(name, inline);
        synchronized (streams) {
            streams.add(s);
        }
        return s;
    }

    /** A stream of this backend: closing it returns its cached memory and forgets it. */
    private final class ManagedStream extends CpuStream {
        ManagedStream(String name, boolean inline) {
            super(name, inline, debugStreams ? DEBUG_MAX_DELAY_NANOS : 0, hostSyncs);
        }

        @Override
        public void close() {
            if (isClosed()) {
                return;
            }
            super.close();
            allocator.streamClosed(this);
            synchronized (streams) {
                streams.remove(this);
            }
        }
    }

    private List<CpuStream> openStreams() {
        synchronized (streams) {
            return new ArrayList<>(streams);
        }
    }

    /** The stream work issued now belongs to: the one running on this thread if it is ours, else the current one. */
    private CpuStream stream() {
        CpuStream running = CpuStream.running();
        if (running != null && owns(running)) {
            return running;
        }
        CpuStream s = current.get();
        if (s.isClosed()) {
            throw new IllegalStateException("the current stream '" + s.name() + "' of this thread is closed;"
                    + " call setStream first");
        }
        return s;
    }

    private boolean owns(CpuStream s) {
        synchronized (streams) {
            return streams.contains(s);
        }
    }

    private CpuStream own(Stream stream, String op) {
        if (!(stream instanceof CpuStream s) || !owns(s)) {
            throw new IllegalArgumentException(op + ": " + stream + " is not an open stream of this CPU backend");
        }
        return s;
    }

    /**
     * Checks that the host issues work on open CPU tensors, then runs {@code work} in order on the
     * current stream (at once when called from inside stream work).
     */
    private void issue(String op, Runnable work, Tensor... tensors) {
        issue(op, op, 0, work, tensors);
    }

    /** As above, timed under {@code timeKey} (with {@code flops} of work) when op times are on (OpTimes). */
    private void issue(String op, String timeKey, long flops, Runnable work, Tensor... tensors) {
        checkOpen();
        if (!CpuStream.inStreamWork()) {   // inside stream work the host may rightly have closed them since
            for (Tensor t : tensors) {
                if (t != null) {
                    CpuStorage.checkIssue(op, t);
                }
            }
        }
        stream().execute(OpTimes.timed(timeKey, flops, work));
    }

    /** Runs {@code work} in order on the current stream and waits for its value: a host synchronisation. */
    private <T> T read(String op, java.util.function.Supplier<T> work, Tensor... tensors) {
        hostSyncs.incrementAndGet();
        Object[] result = new Object[1];
        issue(op, () -> result[0] = work.get(), tensors);
        stream().awaitIdle();
        @SuppressWarnings("unchecked")
        T value = (T) result[0];
        return value;
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("the CPU backend was closed");
        }
        threads.checkOpen();
    }
}
