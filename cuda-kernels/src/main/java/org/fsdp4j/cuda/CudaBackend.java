// The Backend on one NVIDIA GPU: device memory from a caching allocator, named streams and
// events, cuBLAS GEMMs (one handle per stream), and our own kernels (src/main/cuda) through
// their launchers. Every op is issued on the calling thread's current stream and returns
// without waiting, except the ones that hand a value to the host (copyToHost, sums, the
// inf/NaN check, copyFromHost), which wait for that stream only.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cuCtxSetCurrent;
import static org.bytedeco.cuda.global.cudart.cuDeviceGet;
import static org.bytedeco.cuda.global.cudart.cuInit;
import static org.bytedeco.cuda.global.cudart.cuDevicePrimaryCtxRelease;
import static org.bytedeco.cuda.global.cudart.cuDevicePrimaryCtxRetain;
import static org.bytedeco.cuda.global.cudart.cudaDeviceSynchronize;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaGetDeviceProperties;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyAsync;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToDevice;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToHost;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyHostToDevice;
import static org.bytedeco.cuda.global.cudart.cudaMemsetAsync;
import static org.bytedeco.cuda.global.cudart.cudaSetDevice;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.cuda.cudart.CUctx_st;
import org.bytedeco.cuda.cudart.cudaDeviceProp;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.ShortPointer;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Tensor;

public final class CudaBackend implements Backend {

    /** Host conversions (fp16/bf16 ↔ fp32) go through chunks of this many elements. */
    private static final int HOST_CHUNK = 1 << 20;

    private final Device device;
    private final int index;
    private final MemoryTracker tracker;
    private final CudaOptions options;
    private final String name;
    private final int computeCapability;
    private final int multiprocessors;
    /** The device's primary context (the one the runtime API uses), retained for our driver-API launches. */
    private final CUctx_st primaryContext = new CUctx_st();
    private final int driverDevice;

    private final CudaModule module;
    private final CachingAllocator allocator;
    private final PinnedBuffer pinned;
    /** The default stream of every thread: the forward/backward compute (DESIGN.md, Streams). */
    private final CudaStream compute;
    private final List<CudaStream> streams = new ArrayList<>();
    private final Map<CudaStream, CublasHandle> cublasHandles = new HashMap<>();
    private final ThreadLocal<CudaStream> current;

    private final CastLauncher casts;
    private final ElementwiseLauncher elementwise;
    private final GeluLauncher gelu;
    private final LayerNormLauncher layerNorm;
    private final AttentionLauncher attention;
    private final CrossEntropyLauncher crossEntropy;
    private final EmbeddingLauncher embedding;
    private final OptimizerLauncher optimizer;
    private final ReductionLauncher reductions;
    private boolean closed;

    /** A backend on GPU {@code index}; fails with the probe's reason when CUDA is unusable. */
    public CudaBackend(int index, MemoryTracker tracker, CudaOptions options) {
        CudaProbe.Result probe = CudaProbe.probe();
        if (!probe.usable()) {
            throw new IllegalStateException("CUDA is not usable: " + probe.unavailableReason().get());
        }
        if (index >= probe.deviceCount()) {
            throw new IllegalArgumentException("cuda:" + index + " does not exist: " + probe.deviceCount()
                    + " device(s) are visible");
        }
        this.index = index;
        this.device = Device.cuda(index);
        this.tracker = tracker;
        this.options = options;
        CudaCheck.checkDriver(cuInit(0), "cuInit", index);   // done by the runtime already; idempotent
        int[] dev = {0};
        CudaCheck.checkDriver(cuDeviceGet(dev, index), "cuDeviceGet(" + index + ")", index);
        this.driverDevice = dev[0];
        CudaCheck.checkDriver(cuDevicePrimaryCtxRetain(primaryContext, driverDevice), "cuDevicePrimaryCtxRetain", index);
        enter();
        CudaCheck.check(cudaFree(new Pointer()), "cudaFree(NULL) (context initialisation)", index);
        cudaDeviceProp props = new cudaDeviceProp();
        CudaCheck.check(cudaGetDeviceProperties(props, index), "cudaGetDeviceProperties", index);
        this.computeCapability = props.major() * 10 + props.minor();
        this.multiprocessors = props.multiProcessorCount();
        this.name = device + " (" + props.name().getString() + ", sm_" + computeCapability + ", " + multiprocessors
                + " SMs, " + (props.totalGlobalMem() >> 30) + " GiB" + (options.allowTf32() ? ", TF32" : "") + ")";
        this.module = new CudaModule(index);
        this.allocator = new CachingAllocator(index);
        this.pinned = new PinnedBuffer(index);
        this.compute = new CudaStream("compute", index, this::beforeStreamDestroy);
        this.current = ThreadLocal.withInitial(() -> compute);
        this.casts = new CastLauncher(module);
        this.elementwise = new ElementwiseLauncher(module);
        this.gelu = new GeluLauncher(module);
        this.layerNorm = new LayerNormLauncher(module);
        this.attention = new AttentionLauncher(module);
        this.crossEntropy = new CrossEntropyLauncher(module);
        this.embedding = new EmbeddingLauncher(module);
        this.optimizer = new OptimizerLauncher(module);
        this.reductions = new ReductionLauncher(module);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public MemoryTracker memory() {
        return tracker;
    }

    /** Compute capability as major·10 + minor (90 for Hopper). */
    public int computeCapability() {
        return computeCapability;
    }

    public int multiprocessors() {
        return multiprocessors;
    }

    /** In-use, peak and reserved bytes of the caching allocator, and its cudaMalloc count. */
    public AllocatorStats allocatorStats() {
        return allocator.stats();
    }

    // ------------------------------------------------------------------ memory

    @Override
    public Tensor allocate(DType dtype, MemoryCategory category, long... shape) {
        enter();
        long numBytes = Math.multiplyExact(Tensor.numelOf(shape), (long) dtype.byteSize());
        CachingAllocator.Block block = allocator.allocate(numBytes, currentStream());
        try {
            return Tensor.owning(new CudaStorage(this, block, numBytes, category, tracker), dtype, shape);
        } catch (RuntimeException e) {
            allocator.free(block, block.stream());
            throw e;
        }
    }

    /** Called by CudaStorage.release: back to the cache, ordered after the caller's stream. */
    void releaseBlock(CachingAllocator.Block block) {
        enter();
        CudaStream caller = current.get();
        allocator.free(block, caller.isClosed() ? block.stream() : caller);
    }

    @Override
    public void fill(Tensor t, float value) {
        on("fill", t);
        elementwise.fill(currentStream(), t, value);
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        on("copy", src, dst);
        sameNumel("copy", src, dst);
        if (src.dtype() == dst.dtype()) {
            CudaCheck.check(cudaMemcpyAsync(ptr(dst), ptr(src), src.numBytes(), cudaMemcpyDeviceToDevice,
                    currentStream().handle()), "cudaMemcpyAsync(device→device, " + src.numBytes() + " bytes)", index);
            return;
        }
        if (!src.dtype().isFloating() || !dst.dtype().isFloating()) {
            throw new IllegalArgumentException("copy: cannot convert " + src + " to " + dst
                    + "; int32 copies only to int32");
        }
        casts.cast(currentStream(), src, dst);
    }

    @Override
    public void copyFromHost(float[] src, int srcOffset, Tensor dst) {
        on("copyFromHost", dst);
        floating("copyFromHost", dst);
        int n = hostRange("copyFromHost", src.length, srcOffset, dst);
        CudaStream s = currentStream();
        synchronized (pinned) {
            BytePointer h = pinned.atLeast(dst.numBytes());
            if (dst.dtype() == DType.F32) {
                new FloatPointer(h).put(src, srcOffset, n);
            } else {
                ShortPointer hs = new ShortPointer(h);
                short[] chunk = new short[Math.min(n, HOST_CHUNK)];
                for (int i = 0; i < n; i += chunk.length) {
                    int len = Math.min(chunk.length, n - i);
                    for (int j = 0; j < len; j++) {
                        float x = src[srcOffset + i + j];
                        chunk[j] = dst.dtype() == DType.F16 ? DType.floatToHalf(x) : DType.floatToBf16(x);
                    }
                    hs.position(i).put(chunk, 0, len);
                }
            }
            upload(h, dst, s);
        }
    }

    @Override
    public void copyFromHost(int[] src, int srcOffset, Tensor dst) {
        on("copyFromHost", dst);
        if (dst.dtype() != DType.I32) {
            throw new IllegalArgumentException("copyFromHost(int[]): " + dst + " is not int32");
        }
        int n = hostRange("copyFromHost", src.length, srcOffset, dst);
        CudaStream s = currentStream();
        synchronized (pinned) {
            BytePointer h = pinned.atLeast(dst.numBytes());
            new IntPointer(h).put(src, srcOffset, n);
            upload(h, dst, s);
        }
    }

    @Override
    public void copyToHost(Tensor src, float[] dst, int dstOffset) {
        on("copyToHost", src);
        int n = hostRange("copyToHost", dst.length, dstOffset, src);
        CudaStream s = currentStream();
        synchronized (pinned) {
            BytePointer h = download(src, s);
            switch (src.dtype()) {
                case F32 -> new FloatPointer(h).get(dst, dstOffset, n);
                case I32 -> {
                    IntPointer hi = new IntPointer(h);
                    int[] chunk = new int[Math.min(n, HOST_CHUNK)];
                    for (int i = 0; i < n; i += chunk.length) {
                        int len = Math.min(chunk.length, n - i);
                        hi.position(i).get(chunk, 0, len);
                        for (int j = 0; j < len; j++) {
                            dst[dstOffset + i + j] = chunk[j];
                        }
                    }
                }
                default -> {
                    ShortPointer hs = new ShortPointer(h);
                    short[] chunk = new short[Math.min(n, HOST_CHUNK)];
                    boolean half = src.dtype() == DType.F16;
                    for (int i = 0; i < n; i += chunk.length) {
                        int len = Math.min(chunk.length, n - i);
                        hs.position(i).get(chunk, 0, len);
                        for (int j = 0; j < len; j++) {
                            dst[dstOffset + i + j] = half ? DType.halfToFloat(chunk[j]) : DType.bf16ToFloat(chunk[j]);
                        }
                    }
                }
            }
        }
    }

    @Override
    public void copyToHost(Tensor src, int[] dst, int dstOffset) {
        on("copyToHost", src);
        if (src.dtype() != DType.I32) {
            throw new IllegalArgumentException("copyToHost(int[]): " + src + " is not int32");
        }
        int n = hostRange("copyToHost", dst.length, dstOffset, src);
        CudaStream s = currentStream();
        synchronized (pinned) {
            new IntPointer(download(src, s)).get(dst, dstOffset, n);
        }
    }

    private void upload(BytePointer h, Tensor dst, CudaStream s) {
        CudaCheck.check(cudaMemcpyAsync(ptr(dst), h, dst.numBytes(), cudaMemcpyHostToDevice, s.handle()),
                "cudaMemcpyAsync(host→device, " + dst.numBytes() + " bytes)", index);
        s.synchronize();   // the pinned staging buffer is reused by the next copy
    }

    private BytePointer download(Tensor src, CudaStream s) {
        BytePointer h = pinned.atLeast(src.numBytes());
        CudaCheck.check(cudaMemcpyAsync(h, ptr(src), src.numBytes(), cudaMemcpyDeviceToHost, s.handle()),
                "cudaMemcpyAsync(device→host, " + src.numBytes() + " bytes)", index);
        s.synchronize();
        return h;
    }

    // ------------------------------------------------------------------ GEMM

    @Override
    public void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch) {
        on("gemm", a, b, c);
        if (m < 1 || n < 1 || k < 1 || batch < 1) {
            throw new IllegalArgumentException("gemm: m, n, k and batch must be >= 1, got m=" + m + " n=" + n + " k=" + k
                    + " batch=" + batch);
        }
        gemmExtent("A", a, transA, m, k, lda, strideA, batch);
        gemmExtent("B", b, transB, k, n, ldb, strideB, batch);
        gemmExtent("C", c, false, m, n, ldc, strideC, batch);
        floating("gemm", a, b, c);
        if (CublasGemm.supported(a.dtype(), b.dtype(), c.dtype())) {
            CublasGemm.gemm(cublas(), index, options.allowTf32(), transA, transB, m, n, k, alpha, a, lda, strideA,
                    b, ldb, strideB, beta, c, ldc, strideC, batch);
            return;
        }
        // A dtype mix cuBLAS has no kernel for (e.g. fp32 × bf16): promote all three to fp32.
        try (Tensor a32 = promoted(a); Tensor b32 = promoted(b); Tensor c32 = promoted(c)) {
            CublasGemm.gemm(cublas(), index, options.allowTf32(), transA, transB, m, n, k, alpha, a32, lda, strideA,
                    b32, ldb, strideB, beta, c32, ldc, strideC, batch);
            copy(c32, c);
        }
    }

    private Tensor promoted(Tensor t) {
        Tensor f = allocate(DType.F32, MemoryCategory.WORKSPACE, t.shape());
        copy(t, f);
        return f;
    }

    private static void gemmExtent(String which, Tensor t, boolean trans, int rows, int cols, int ld, long stride,
                                   int batch) {
        int storedRows = trans ? cols : rows;
        int storedCols = trans ? rows : cols;
        if (ld < storedCols) {
            throw new IllegalArgumentException("gemm: ld" + which.toLowerCase() + "=" + ld + " is less than the "
                    + storedCols + " columns " + which + " has as stored (trans=" + trans + ")");
        }
        long need = stride * (batch - 1) + (long) (storedRows - 1) * ld + storedCols;
        if (stride < 0 || need > t.numel()) {
            throw new IllegalArgumentException("gemm: " + which + " needs " + need + " elements (" + batch + " × "
                    + storedRows + "×" + storedCols + ", ld " + ld + ", stride " + stride + ") but " + t + " has "
                    + t.numel());
        }
    }

    private CublasHandle cublas() {
        CudaStream s = currentStream();
        synchronized (cublasHandles) {
            CublasHandle h = cublasHandles.get(s);
            if (h == null) {
                Tensor ws = allocate(DType.F32, MemoryCategory.WORKSPACE,
                        Math.max(1, options.cublasWorkspaceBytes() / 4));
                h = new CublasHandle(s, ws, index);
                cublasHandles.put(s, h);
            }
            return h;
        }
    }

    // ------------------------------------------------------------------ elementwise

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        on("add", a, b, out);
        floating("add", a, b, out);
        sameNumel("add", a, b, out);
        elementwise.add(currentStream(), a, b, out);
    }

    @Override
    public void scale(Tensor t, float alpha) {
        on("scale", t);
        floating("scale", t);
        reductions.scale(currentStream(), t, alpha);
    }

    @Override
    public void addBias(Tensor out, Tensor bias) {
        on("addBias", out, bias);
        floating("addBias", out, bias);
        int cols = lastDimMatches("addBias", out, bias);
        elementwise.addBias(currentStream(), out, bias, out.numel() / cols, cols);
    }

    @Override
    public void biasBackward(Tensor dout, Tensor dbias) {
        on("biasBackward", dout, dbias);
        floating("biasBackward", dout, dbias);
        int cols = lastDimMatches("biasBackward", dout, dbias);
        elementwise.biasBackward(currentStream(), dout, dbias, dout.numel() / cols, cols);
    }

    @Override
    public void geluForward(Tensor inp, Tensor out) {
        on("geluForward", inp, out);
        floating("geluForward", inp, out);
        sameNumel("geluForward", inp, out);
        gelu.forward(currentStream(), inp, out);
    }

    @Override
    public void geluBackward(Tensor inp, Tensor dout, Tensor dinp) {
        on("geluBackward", inp, dout, dinp);
        floating("geluBackward", inp, dout, dinp);
        sameNumel("geluBackward", inp, dout, dinp);
        gelu.backward(currentStream(), inp, dout, dinp);
    }

    // ------------------------------------------------------------------ layers

    @Override
    public void layerNormForward(Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd) {
        on("layerNormForward", inp, weight, bias, out, mean, rstd);
        floating("layerNormForward", inp, weight, bias, out);
        int c = (int) inp.dim(-1);
        long rows = inp.numel() / c;
        requireNumel("layerNormForward", c, weight, bias);
        requireNumel("layerNormForward", inp.numel(), out);
        requireNumel("layerNormForward", rows, mean, rstd);
        f32("layerNormForward", mean, rstd);
        layerNorm.forward(currentStream(), inp, weight, bias, out, mean, rstd, rows, c);
    }

    @Override
    public void layerNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                                  Tensor dinp, Tensor dweight, Tensor dbias) {
        on("layerNormBackward", dout, inp, weight, mean, rstd, dinp, dweight, dbias);
        floating("layerNormBackward", dout, inp, weight, dinp, dweight, dbias);
        int c = (int) inp.dim(-1);
        long rows = inp.numel() / c;
        requireNumel("layerNormBackward", inp.numel(), dout, dinp);
        requireNumel("layerNormBackward", c, weight, dweight, dbias);
        requireNumel("layerNormBackward", rows, mean, rstd);
        f32("layerNormBackward", mean, rstd);
        layerNorm.backward(currentStream(), dout, inp, weight, mean, rstd, dinp, dweight, dbias, rows, c);
    }

    @Override
    public void embeddingForward(Tensor tokens, Tensor wte, Tensor wpe, Tensor out) {
        on("embeddingForward", tokens, wte, wpe, out);
        int[] btcv = embeddingShape("embeddingForward", tokens, wte, wpe, out);
        embedding.forward(currentStream(), tokens, wte, wpe, out, btcv[0], btcv[1], btcv[2], btcv[3]);
    }

    @Override
    public void embeddingBackward(Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe) {
        on("embeddingBackward", tokens, dout, dwte, dwpe);
        int[] btcv = embeddingShape("embeddingBackward", tokens, dwte, dwpe, dout);
        try (Tensor present = allocate(DType.I32, MemoryCategory.WORKSPACE, btcv[3])) {
            embedding.backward(currentStream(), tokens, dout, dwte, dwpe, present, btcv[0], btcv[1], btcv[2], btcv[3]);
        }
    }

    /** Checks tokens (B, T) I32, wte (V, C), wpe (≥T, C), x (B, T, C); returns {B, T, C, V}. */
    private static int[] embeddingShape(String op, Tensor tokens, Tensor wte, Tensor wpe, Tensor x) {
        if (tokens.dtype() != DType.I32 || tokens.rank() != 2 || wte.rank() != 2 || wpe.rank() != 2) {
            throw new IllegalArgumentException(op + ": needs tokens (B, T) int32, wte (V, C), wpe (maxT, C); got "
                    + tokens + ", " + wte + ", " + wpe);
        }
        floating(op, wte, wpe, x);
        int b = (int) tokens.dim(0);
        int t = (int) tokens.dim(1);
        int c = (int) wte.dim(1);
        if (wpe.dim(1) != c || wpe.dim(0) < t || x.numel() != (long) b * t * c) {
            throw new IllegalArgumentException(op + ": shapes do not agree: tokens " + Arrays.toString(tokens.shape())
                    + ", wte " + Arrays.toString(wte.shape()) + ", wpe " + Arrays.toString(wpe.shape()) + ", "
                    + Arrays.toString(x.shape()) + " (want (B, T, C) with wpe rows >= T)");
        }
        return new int[] {b, t, c, (int) wte.dim(0)};
    }

    @Override
    public void splitHeads(Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads) {
        on("splitHeads", qkv, q, k, v);
        int[] bthd = headsShape("splitHeads", q, numHeads, qkv, 3, k, v);
        attention.splitHeads(currentStream(), qkv, q, k, v, bthd[0], bthd[1], bthd[2], bthd[3]);
    }

    @Override
    public void splitHeadsBackward(Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads) {
        on("splitHeadsBackward", dq, dk, dv, dqkv);
        int[] bthd = headsShape("splitHeadsBackward", dq, numHeads, dqkv, 3, dk, dv);
        attention.splitHeadsBackward(currentStream(), dq, dk, dv, dqkv, bthd[0], bthd[1], bthd[2], bthd[3]);
    }

    @Override
    public void mergeHeads(Tensor y, Tensor out) {
        on("mergeHeads", y, out);
        int[] bthd = headsShape("mergeHeads", y, y.rank() == 4 ? (int) y.dim(1) : -1, out, 1);
        attention.mergeHeads(currentStream(), y, out, bthd[0], bthd[1], bthd[2], bthd[3]);
    }

    @Override
    public void mergeHeadsBackward(Tensor dout, Tensor dy) {
        on("mergeHeadsBackward", dout, dy);
        int[] bthd = headsShape("mergeHeadsBackward", dy, dy.rank() == 4 ? (int) dy.dim(1) : -1, dout, 1);
        attention.mergeHeadsBackward(currentStream(), dout, dy, bthd[0], bthd[1], bthd[2], bthd[3]);
    }

    /**
     * Checks heads (B, H, T, D) with H = numHeads, tokens = B·T·(parts·H·D) elements, and that the
     * other head tensors match heads in shape and dtype; returns {B, T, H, D}.
     */
    private static int[] headsShape(String op, Tensor heads, int numHeads, Tensor tokens, int parts,
                                    Tensor... sameAsHeads) {
        floating(op, heads, tokens);
        if (heads.rank() != 4 || heads.dim(1) != numHeads) {
            throw new IllegalArgumentException(op + ": " + heads + " is not (B, H=" + numHeads + ", T, C/H)");
        }
        int b = (int) heads.dim(0);
        int h = (int) heads.dim(1);
        int t = (int) heads.dim(2);
        int d = (int) heads.dim(3);
        if (tokens.numel() != (long) b * t * parts * h * d) {
            throw new IllegalArgumentException(op + ": " + tokens + " is not (B=" + b + ", T=" + t + ", "
                    + parts + "·C=" + (parts * h * d) + ")");
        }
        for (Tensor o : sameAsHeads) {
            if (!Arrays.equals(o.shape(), heads.shape()) || o.dtype() != heads.dtype()) {
                throw new IllegalArgumentException(op + ": " + o + " must match " + heads + " in shape and dtype");
            }
        }
        return new int[] {b, t, h, d};
    }

    @Override
    public void causalSoftmaxForward(Tensor preatt, Tensor att, float scale) {
        on("causalSoftmaxForward", preatt, att);
        int t = squareRows("causalSoftmaxForward", preatt, att);
        attention.causalSoftmaxForward(currentStream(), preatt, att, preatt.numel() / t, t, scale);
    }

    @Override
    public void causalSoftmaxBackward(Tensor att, Tensor datt, Tensor dpreatt, float scale) {
        on("causalSoftmaxBackward", att, datt, dpreatt);
        int t = squareRows("causalSoftmaxBackward", att, datt, dpreatt);
        attention.causalSoftmaxBackward(currentStream(), att, datt, dpreatt, att.numel() / t, t, scale);
    }

    private static int squareRows(String op, Tensor first, Tensor... others) {
        floating(op, first);
        floating(op, others);
        if (first.rank() < 2 || first.dim(-1) != first.dim(-2)) {
            throw new IllegalArgumentException(op + ": " + first + " is not (BH, T, T)");
        }
        requireNumel(op, first.numel(), others);
        return (int) first.dim(-1);
    }

    @Override
    public void crossEntropyForward(Tensor logits, Tensor targets, Tensor losses) {
        on("crossEntropyForward", logits, targets, losses);
        int v = crossEntropyShape("crossEntropyForward", logits, targets);
        f32("crossEntropyForward", losses);
        requireNumel("crossEntropyForward", targets.numel(), losses);
        crossEntropy.forward(currentStream(), logits, targets, losses, targets.numel(), v);
    }

    @Override
    public void crossEntropyBackward(Tensor logits, Tensor targets, float dloss, Tensor dlogits) {
        on("crossEntropyBackward", logits, targets, dlogits);
        int v = crossEntropyShape("crossEntropyBackward", logits, targets);
        floating("crossEntropyBackward", dlogits);
        requireNumel("crossEntropyBackward", logits.numel(), dlogits);
        crossEntropy.backward(currentStream(), logits, targets, dloss, dlogits, targets.numel(), v);
    }

    private static int crossEntropyShape(String op, Tensor logits, Tensor targets) {
        floating(op, logits);
        if (targets.dtype() != DType.I32) {
            throw new IllegalArgumentException(op + ": targets " + targets + " must be int32");
        }
        int v = (int) logits.dim(-1);
        if (logits.numel() != targets.numel() * v) {
            throw new IllegalArgumentException(op + ": logits " + logits + " is not (N=" + targets.numel() + ", V)");
        }
        return v;
    }

    // ------------------------------------------------------------------ optimizer and reductions

    @Override
    public void adamW(Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep step) {
        on("adamW", param, grad, m, v);
        f32("adamW", param, m, v);
        floating("adamW", grad);
        sameNumel("adamW", param, grad, m, v);
        optimizer.adamW(currentStream(), param, grad, m, v, step);
    }

    @Override
    public void sgdMomentum(Tensor param, Tensor grad, Tensor momentumBuf, float lr, float momentum,
                            float weightDecay, float gradScale) {
        on("sgdMomentum", param, grad, momentumBuf);
        f32("sgdMomentum", param, momentumBuf);
        floating("sgdMomentum", grad);
        sameNumel("sgdMomentum", param, grad, momentumBuf);
        optimizer.sgdMomentum(currentStream(), param, grad, momentumBuf, lr, momentum, weightDecay, gradScale);
    }

    @Override
    public double sumOfSquares(Tensor t) {
        return reduce("sumOfSquares", t, true);
    }

    @Override
    public double sum(Tensor t) {
        return reduce("sum", t, false);
    }

    private double reduce(String op, Tensor t, boolean squared) {
        on(op, t);
        floating(op, t);
        CudaStream s = currentStream();
        long partialFloats = 2L * ReductionLauncher.SUM_BLOCKS;          // doubles, as pairs of floats
        try (Tensor scratch = allocate(DType.F32, MemoryCategory.WORKSPACE, partialFloats + 2)) {
            Tensor result = scratch.view(partialFloats, 2);
            reductions.sum(s, t, squared, scratch.view(0, partialFloats), result);
            synchronized (pinned) {
                return new DoublePointer(download(result, s)).get(0);
            }
        }
    }

    @Override
    public boolean hasNonFinite(Tensor t) {
        on("hasNonFinite", t);
        floating("hasNonFinite", t);
        CudaStream s = currentStream();
        try (Tensor flag = allocate(DType.I32, MemoryCategory.WORKSPACE, 1)) {
            CudaCheck.check(cudaMemsetAsync(ptr(flag), 0, 4, s.handle()), "cudaMemsetAsync(flag)", index);
            reductions.nonFinite(s, t, flag);
            synchronized (pinned) {
                return new IntPointer(download(flag, s)).get(0) != 0;
            }
        }
    }

    // ------------------------------------------------------------------ streams and events

    @Override
    public Stream newStream(String streamName) {
        enter();
        CudaStream s = new CudaStream(streamName, index, this::beforeStreamDestroy);
        synchronized (streams) {
            streams.add(s);
        }
        return s;
    }

    @Override
    public void setStream(Stream stream) {
        if (stream == null) {
            current.set(compute);
            return;
        }
        if (!(stream instanceof CudaStream s) || s.device() != index || s.isClosed()) {
            throw new IllegalArgumentException("setStream: " + stream + " is not an open stream of " + device);
        }
        current.set(s);
    }

    /** The calling thread's current stream (compute unless setStream said otherwise). */
    public CudaStream currentStream() {
        CudaStream s = current.get();
        if (s.isClosed()) {
            throw new IllegalStateException("the current stream '" + s.name() + "' of this thread is closed;"
                    + " call setStream first");
        }
        return s;
    }

    @Override
    public Event record() {
        enter();
        return CudaEvent.record(currentStream(), false);
    }

    /** A timing event on the current stream, for benchmarks (CudaEvent.elapsedMsSince). */
    public CudaEvent recordTiming() {
        enter();
        return CudaEvent.record(currentStream(), true);
    }

    @Override
    public void waitFor(Event event) {
        enter();
        if (!(event instanceof CudaEvent e)) {
            throw new IllegalArgumentException("waitFor: " + event + " is not a CUDA event");
        }
        e.waitOn(currentStream());
    }

    @Override
    public void synchronize() {
        enter();
        CudaCheck.check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", index);
    }

    private void beforeStreamDestroy(CudaStream s) {
        enter();
        s.synchronize();
        CublasHandle h;
        synchronized (cublasHandles) {
            h = cublasHandles.remove(s);
        }
        if (h != null) {
            h.close();
        }
        allocator.releaseStream(s);
        synchronized (streams) {
            streams.remove(s);
        }
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        synchronize();
        List<CudaStream> open;
        synchronized (streams) {
            open = new ArrayList<>(streams);
        }
        for (CudaStream s : open) {
            s.close();
        }
        compute.close();
        allocator.close();
        pinned.close();
        module.close();
        CudaCheck.checkDriver(cuDevicePrimaryCtxRelease(driverDevice), "cuDevicePrimaryCtxRelease", index);
    }

    // ------------------------------------------------------------------ checks

    /**
     * Makes this GPU current on the calling thread for the runtime API and, through its primary
     * context, for the driver API our kernel launches use (cheap; CUDA keeps both per thread).
     */
    private void enter() {
        CudaCheck.check(cudaSetDevice(index), "cudaSetDevice(" + index + ")", index);
        CudaCheck.checkDriver(cuCtxSetCurrent(primaryContext), "cuCtxSetCurrent", index);
    }

    private void on(String op, Tensor... ts) {
        if (closed) {
            throw new IllegalStateException(op + ": the backend of " + device + " is closed");
        }
        for (Tensor t : ts) {
            DeviceTensors.requireOn(device, t, op);
        }
        enter();
    }

    private static Pointer ptr(Tensor t) {
        return new DevicePointer(DeviceTensors.address(t));
    }

    private static void floating(String op, Tensor... ts) {
        for (Tensor t : ts) {
            if (!t.dtype().isFloating()) {
                throw new IllegalArgumentException(op + ": " + t + " must be fp32, fp16 or bf16");
            }
        }
    }

    private static void f32(String op, Tensor... ts) {
        for (Tensor t : ts) {
            if (t.dtype() != DType.F32) {
                throw new IllegalArgumentException(op + ": " + t + " must be fp32");
            }
        }
    }

    private static void sameNumel(String op, Tensor first, Tensor... others) {
        requireNumel(op, first.numel(), others);
    }

    private static void requireNumel(String op, long numel, Tensor... ts) {
        for (Tensor t : ts) {
            if (t.numel() != numel) {
                throw new IllegalArgumentException(op + ": " + t + " has " + t.numel() + " elements, expected " + numel);
            }
        }
    }

    /** out (N, C) and vector (C): returns C. */
    private static int lastDimMatches(String op, Tensor matrix, Tensor vector) {
        long cols = vector.numel();
        if (cols == 0 || matrix.dim(-1) != cols) {
            throw new IllegalArgumentException(op + ": " + matrix + " does not end in the " + cols + " elements of "
                    + vector);
        }
        return (int) cols;
    }

    private static int hostRange(String op, int arrayLength, int offset, Tensor t) {
        long n = t.numel();
        if (offset < 0 || offset + n > arrayLength) {
            throw new IllegalArgumentException(op + ": [" + offset + ", " + (offset + n) + ") is outside an array of "
                    + arrayLength + " for " + t);
        }
        return (int) n;
    }
}
