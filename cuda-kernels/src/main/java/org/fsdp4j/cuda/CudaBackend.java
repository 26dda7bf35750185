// The Backend on one NVIDIA GPU: device memory from a caching allocator, named streams and
// events, cuBLAS GEMMs (one handle per stream), and our own kernels (src/main/cuda) through
// their launchers. Every op is issued on the calling thread's current stream and returns
// without waiting, except the ones that hand a value to the host (copyToHost, sum,
// sumOfSquares, hasNonFinite, the synchronizes), which wait for that stream only and are
// counted as host synchronisations. copyFromHost stages through pinned buffers and does not wait.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cuCtxSetCurrent;
import static org.bytedeco.cuda.global.cudart.cuDeviceGet;
import static org.bytedeco.cuda.global.cudart.cuDevicePrimaryCtxRelease;
import static org.bytedeco.cuda.global.cudart.cuDevicePrimaryCtxRetain;
import static org.bytedeco.cuda.global.cudart.cuInit;
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
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.concurrent.atomic.AtomicLong;
import org.bytedeco.cuda.cudart.CUctx_st;
import org.bytedeco.cuda.cudart.cudaDeviceProp;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.ShortPointer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.HalfGemmPadding;
import org.fsdp4j.backend.OpTiming;
import org.fsdp4j.backend.Shapes.HeadLayout;
import org.fsdp4j.backend.Shapes.QkvLayout;
import org.fsdp4j.backend.Shapes;

public final class CudaBackend implements Backend {

    /** Host conversions (fp16/bf16 ↔ fp32) go through chunks of this many elements. */
    private static final int HOST_CHUNK = 1 << 20;

    private final Device device;
    private final int index;
    private final MemoryTracker tracker;
    private final CudaOptions options;
    private final String name;
    /** What CUDA calls the GPU ("NVIDIA H200"). */
    private final String deviceName;
    private final int computeCapability;
    private final int multiprocessors;
    /** The device's primary context (the one the runtime API uses), retained for our driver-API launches. */
    private final CUctx_st primaryContext = new CUctx_st();
    private final int driverDevice;

    private final CudaModule module;
    private final CachingAllocator allocator;
    private final PinnedStaging staging;            // host↔device copies
    private final AtomicLong hostSyncs = new AtomicLong();
    private final AtomicLong promotedCopies = new AtomicLong();
    /** The default stream of every thread: the forward/backward compute. */
    private final CudaStream compute;
    private final List<CudaStream> streams = new ArrayList<>();
    private final Map<CudaStream, CublasHandle> cublasHandles = new HashMap<>();
    private final ThreadLocal<CudaStream> current;

    private final CastLauncher casts;
    private final ElementwiseLauncher elementwise;
    private final GeluLauncher gelu;
    private final SwigluLauncher swiglu;
    private final LayerNormLauncher layerNorm;
    private final RmsNormLauncher rmsNorm;
    private final RopeLauncher rope;
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
        this.deviceName = props.name().getString();
        this.name = device + " (" + deviceName + ", sm_" + computeCapability + ", " + multiprocessors
                + " SMs, " + (props.totalGlobalMem() >> 30) + " GiB" + (options.allowTf32() ? ", TF32" : "") + ")";
        this.module = new CudaModule(index);
        this.allocator = new CachingAllocator(index);
        this.staging = new PinnedStaging(index);
        this.compute = new CudaStream("compute", index, this::beforeStreamDestroy, hostSyncs);
        this.current = ThreadLocal.withInitial(() -> compute);
        this.casts = new CastLauncher(module);
        this.elementwise = new ElementwiseLauncher(module);
        this.gelu = new GeluLauncher(module);
        this.swiglu = new SwigluLauncher(module);
        this.layerNorm = new LayerNormLauncher(module);
        this.rmsNorm = new RmsNormLauncher(module);
        this.rope = new RopeLauncher(module);
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

    /** From DevicePeaks by device name: tensor-core peaks for fp16/bf16 (and fp32 under TF32), CUDA-core fp32 otherwise. */
    @Override
    public OptionalDouble peakTflops(DType operands) {
        return DevicePeaks.tflops(deviceName, operands, options.allowTf32());
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
            allocator.free(block, List.of());
            throw e;
        }
    }

    /**
     * Called by CudaStorage.release: back to its stream's cache, or pending until the other
     * streams that used it ({@code users}) have done what they were given so far.
     */
    void releaseBlock(CachingAllocator.Block block, List<CudaStream> users) {
        enter();
        List<CudaEvent> events = new ArrayList<>();
        for (CudaStream u : users) {
            if (!u.isClosed()) {
                events.add(u.record());
            }
        }
        allocator.free(block, events);
    }

    @Override
    public void recordStream(Tensor t, Stream stream) {
        on("recordStream", t);
        if (!(t.storage() instanceof CudaStorage s) || !(stream instanceof CudaStream cs) || cs.device() != index
                || cs.isClosed()) {
            throw new IllegalArgumentException("recordStream: " + t + " and " + stream + " must belong to " + device);
        }
        s.recordStream(cs);
    }

    @Override
    public void fill(Tensor t, float value) {
        on("fill", t);
        elementwise.fill(currentStream(), t, value);
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        Shapes.sameNumel("copy", src, dst);
        if (src.device().isCpu() || dst.device().isCpu()) {
            copyAcrossHost(src, dst);
            return;
        }
        on("copy", src, dst);
        if (src.dtype() == dst.dtype()) {
            CudaCheck.check(cudaMemcpyAsync(ptr(dst), ptr(src), src.numBytes(), cudaMemcpyDeviceToDevice,
                    currentStream().handle()), "cudaMemcpyAsync(device→device, " + src.numBytes() + " bytes)", index);
            return;
        }
        if (!src.dtype().isFloating() || !dst.dtype().isFloating()) {
            throw Shapes.error("copy", "int32 tensors copy only to int32", src, dst);
        }
        casts.cast(currentStream(), src, dst);
    }

    /**
     * A copy between this GPU and a CPU backend's tensor (offloaded state, page-locked so it is a
     * real DMA), on the current stream: a cast happens on the device, through a temporary.
     */
    private void copyAcrossHost(Tensor src, Tensor dst) {
        boolean toDevice = src.device().isCpu();
        if (toDevice == dst.device().isCpu()) {
            throw Shapes.error("copy", "both tensors are on the host: copy them with the CPU backend", src, dst);
        }
        on("copy", toDevice ? dst : src);
        if (src.dtype() != dst.dtype() && (!src.dtype().isFloating() || !dst.dtype().isFloating())) {
            throw Shapes.error("copy", "int32 tensors copy only to int32", src, dst);
        }
        CudaStream s = currentStream();
        Tensor host = toDevice ? src : dst;
        Pointer hostBytes = new DevicePointer(org.fsdp4j.backend.cpu.CpuStorage.hostAddress(host));
        if (src.dtype() == dst.dtype()) {
            memcpy(toDevice ? ptr(dst) : hostBytes, toDevice ? hostBytes : ptr(src), src.numBytes(), toDevice, s);
            return;
        }
        try (Tensor staged = allocate(host.dtype(), MemoryCategory.WORKSPACE, host.shape())) {   // the host's dtype, here
            if (toDevice) {
                memcpy(ptr(staged), hostBytes, src.numBytes(), true, s);
                casts.cast(s, staged, dst);
            } else {
                casts.cast(s, src, staged);
                memcpy(hostBytes, ptr(staged), dst.numBytes(), false, s);
            }
        }
    }

    private void memcpy(Pointer to, Pointer from, long numBytes, boolean toDevice, CudaStream s) {
        CudaCheck.check(cudaMemcpyAsync(to, from, numBytes, toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                s.handle()), "cudaMemcpyAsync(" + (toDevice ? "host→device, " : "device→host, ") + numBytes + " bytes)", index);
    }

    @Override
    public void copyFromHost(float[] src, int srcOffset, Tensor dst) {
        on("copyFromHost", dst);
        Shapes.floating("copyFromHost", dst);
        int n = Shapes.hostRange("copyFromHost", src.length, srcOffset, dst);
        CudaStream s = currentStream();
        PinnedStaging.Lease lease = staging.take(dst.numBytes());
        {
            BytePointer h = lease.bytes();
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
            upload(lease, dst, s);
        }
    }

    @Override
    public void copyFromHost(int[] src, int srcOffset, Tensor dst) {
        on("copyFromHost", dst);
        Shapes.dtype("copyFromHost", DType.I32, dst);
        int n = Shapes.hostRange("copyFromHost", src.length, srcOffset, dst);
        CudaStream s = currentStream();
        PinnedStaging.Lease lease = staging.take(dst.numBytes());
        new IntPointer(lease.bytes()).put(src, srcOffset, n);
        upload(lease, dst, s);
    }

    @Override
    public void copyToHost(Tensor src, float[] dst, int dstOffset) {
        on("copyToHost", src);
        int n = Shapes.hostRange("copyToHost", dst.length, dstOffset, src);
        CudaStream s = currentStream();
        try (PinnedStaging.Lease lease = download(src, s)) {
            BytePointer h = lease.bytes();
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
        Shapes.dtype("copyToHost", DType.I32, src);
        int n = Shapes.hostRange("copyToHost", dst.length, dstOffset, src);
        CudaStream s = currentStream();
        try (PinnedStaging.Lease lease = download(src, s)) {
            new IntPointer(lease.bytes()).get(dst, dstOffset, n);
        }
    }

    /** Queues the copy out of the staging buffer; the buffer is reused only once this copy is done. */
    private void upload(PinnedStaging.Lease lease, Tensor dst, CudaStream s) {
        CudaCheck.check(cudaMemcpyAsync(ptr(dst), lease.bytes(), dst.numBytes(), cudaMemcpyHostToDevice, s.handle()),
                "cudaMemcpyAsync(host→device, " + dst.numBytes() + " bytes)", index);
        lease.copied(s);
    }

    /** Copies src into a pinned buffer and waits for it (a host synchronisation); close the lease once read. */
    private PinnedStaging.Lease download(Tensor src, CudaStream s) {
        PinnedStaging.Lease lease = staging.take(src.numBytes());
        try {
            CudaCheck.check(cudaMemcpyAsync(lease.bytes(), ptr(src), src.numBytes(), cudaMemcpyDeviceToHost,
                    s.handle()), "cudaMemcpyAsync(device→host, " + src.numBytes() + " bytes)", index);
            s.synchronize();
            return lease;
        } catch (RuntimeException e) {
            lease.close();
            throw e;
        }
    }

    // ------------------------------------------------------------------ GEMM

    @Override
    public void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch) {
        on("gemm", a, b, c);
        Shapes.gemm(transA, transB, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC, batch);
        if (m == 0 || n == 0 || batch == 0) {
            return;
        }
        if (GpuOpTimes.ENABLED) {
            GpuOpTimes.GLOBAL.mark(currentStream(), OpTiming.gemmKey(transA, transB, m, n, k, batch,
                    a.dtype() + "·" + b.dtype() + "→" + c.dtype()), 2L * m * n * k * batch);
        }
        if (k == 0) {
            throw Shapes.error("gemm", "k = 0 (C = beta·C) is not supported on CUDA; scale C instead", a, b, c);
        }
        if (CublasGemm.supported(a.dtype(), b.dtype(), c.dtype())) {
            if (HalfGemmPadding.pads(m, n, k, lda, ldb, ldc, a.dtype(), batch)) {   // off cuBLAS's fast grid
                RealignedGemm.gemm(this, cublas(), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
                return;
            }
            CublasGemm.gemm(cublas(), index, options.allowTf32(), transA, transB, m, n, k, alpha, a, lda, strideA,
                    b, ldb, strideB, beta, c, ldc, strideC, batch);
            return;
        }
        // A dtype mix cuBLAS has no kernel for (e.g. fp32 × bf16): promote all three to fp32.
        promotedCopies.incrementAndGet();
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

    /** This thread's current stream's cuBLAS handle (made on first use). */
    CublasHandle cublas() {
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
        Shapes.pointwise("add", a, b, out);
        elementwise.add(currentStream(), a, b, out);
    }

    @Override
    public void scale(Tensor t, float alpha) {
        on("scale", t);
        Shapes.floating("scale", t);
        reductions.scale(currentStream(), t, alpha);
    }

    @Override
    public void addBias(Tensor out, Tensor bias) {
        on("addBias", out, bias);
        int cols = Shapes.bias("addBias", out, bias);
        elementwise.addBias(currentStream(), out, bias, out.numel() / cols, cols);
    }

    @Override
    public void setBias(Tensor out, Tensor bias) {
        on("setBias", out, bias);
        int cols = Shapes.bias("setBias", out, bias);
        elementwise.setBias(currentStream(), out, bias, out.numel() / cols, cols);
    }

    @Override
    public void biasBackward(Tensor dout, Tensor dbias) {
        on("biasBackward", dout, dbias);
        int cols = Shapes.bias("biasBackward", dout, dbias);
        long rows = dout.numel() / cols;
        try (ColumnSums.Plan plan = columnSumPlan(rows, cols, 1)) {
            elementwise.biasBackward(currentStream(), dout, dbias, rows, cols, plan);
        }
    }

    @Override
    public void geluForward(Tensor inp, Tensor out) {
        on("geluForward", inp, out);
        Shapes.pointwise("geluForward", inp, out);
        gelu.forward(currentStream(), inp, out);
    }

    @Override
    public void geluBackward(Tensor inp, Tensor dout, Tensor dinp) {
        on("geluBackward", inp, dout, dinp);
        Shapes.pointwise("geluBackward", inp, dout, dinp);
        gelu.backward(currentStream(), inp, dout, dinp);
    }

    @Override
    public void swigluForward(Tensor gate, Tensor up, Tensor out) {
        on("swigluForward", gate, up, out);
        Shapes.pointwise("swigluForward", gate, up, out);
        swiglu.forward(currentStream(), gate, up, out);
    }

    @Override
    public void swigluBackward(Tensor gate, Tensor up, Tensor dout, Tensor dgate, Tensor dup) {
        on("swigluBackward", gate, up, dout, dgate, dup);
        Shapes.pointwise("swigluBackward", gate, up, dout, dgate, dup);
        swiglu.backward(currentStream(), gate, up, dout, dgate, dup);
    }

    // ------------------------------------------------------------------ layers

    @Override
    public void layerNormForward(Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd) {
        on("layerNormForward", inp, weight, bias, out, mean, rstd);
        int c = Shapes.layerNorm("layerNormForward", inp, weight, bias, out, mean, rstd);
        long rows = Shapes.rows(inp);
        layerNorm.forward(currentStream(), inp, weight, bias, out, mean, rstd, rows, c);
    }

    @Override
    public void layerNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                                  Tensor dinp, Tensor dweight, Tensor dbias) {
        on("layerNormBackward", dout, inp, weight, mean, rstd, dinp, dweight, dbias);
        int c = Shapes.layerNormBackward(dout, inp, weight, mean, rstd, dinp, dweight, dbias);
        long rows = Shapes.rows(inp);
        try (ColumnSums.Plan plan = columnSumPlan(rows, c, 2)) {
            layerNorm.backward(currentStream(), dout, inp, weight, mean, rstd, dinp, dweight, dbias, rows, c, plan);
        }
    }

    @Override
    public void rmsNormForward(Tensor inp, Tensor weight, Tensor out, Tensor rstd, float eps) {
        on("rmsNormForward", inp, weight, out, rstd);
        int c = Shapes.rmsNorm("rmsNormForward", inp, weight, out, rstd, eps);
        rmsNorm.forward(currentStream(), inp, weight, out, rstd, Shapes.rows(inp), c, eps);
    }

    @Override
    public void rmsNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp, Tensor dweight) {
        on("rmsNormBackward", dout, inp, weight, rstd, dinp, dweight);
        int c = Shapes.rmsNormBackward(dout, inp, weight, rstd, dinp, dweight);
        long rows = Shapes.rows(inp);
        try (ColumnSums.Plan plan = columnSumPlan(rows, c, 1)) {
            rmsNorm.backward(currentStream(), dout, inp, weight, rstd, dinp, dweight, rows, c, plan);
        }
    }

    @Override
    public void embeddingForward(Tensor tokens, Tensor wte, Tensor wpe, Tensor out) {
        on("embeddingForward", tokens, wte, wpe, out);
        Shapes.EmbeddingSizes e = Shapes.embedding("embeddingForward", tokens, wte, wpe, out);
        embedding.forward(currentStream(), tokens, wte, wpe, out, e.b(), e.t(), e.c(), e.vocab());
    }

    @Override
    public void embeddingBackward(Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe) {
        on("embeddingBackward", tokens, dout, dwte, dwpe);
        Shapes.EmbeddingSizes e = Shapes.embedding("embeddingBackward", tokens, dwte, dwpe, dout);
        long scratchInts = EmbeddingLauncher.scratchInts((long) e.b() * e.t(), e.vocab());
        try (Tensor scratch = allocate(DType.I32, MemoryCategory.WORKSPACE, scratchInts)) {
            embedding.backward(currentStream(), tokens, dout, dwte, dwpe, scratch, e.b(), e.t(), e.c(), e.vocab());
        }
    }

    @Override
    public void splitHeads(Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads) {
        on("splitHeads", qkv, q, k, v);
        QkvLayout l = Shapes.splitHeads("splitHeads", qkv, q, k, v, numHeads);
        attention.splitHeads(currentStream(), qkv, q, k, v, (int) l.b(), l.t(), l.heads(), l.kvHeads(), l.hs());
    }

    @Override
    public void splitHeadsBackward(Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads) {
        on("splitHeadsBackward", dq, dk, dv, dqkv);
        QkvLayout l = Shapes.splitHeads("splitHeadsBackward", dqkv, dq, dk, dv, numHeads);
        attention.splitHeadsBackward(currentStream(), dq, dk, dv, dqkv, (int) l.b(), l.t(), l.heads(), l.kvHeads(),
                l.hs());
    }

    @Override
    public void ropeForward(Tensor inp, Tensor cos, Tensor sin, Tensor out) {
        on("ropeForward", inp, cos, sin, out);
        Shapes.RopeSizes r = Shapes.rope("ropeForward", inp, cos, sin, out);
        rope.rope(currentStream(), inp, cos, sin, out, r.rows(), r.t(), r.halfDim(), 1f);
    }

    @Override
    public void ropeBackward(Tensor dout, Tensor cos, Tensor sin, Tensor dinp) {
        on("ropeBackward", dout, cos, sin, dinp);
        Shapes.RopeSizes r = Shapes.rope("ropeBackward", dout, cos, sin, dinp);
        rope.rope(currentStream(), dout, cos, sin, dinp, r.rows(), r.t(), r.halfDim(), -1f);
    }

    @Override
    public void mergeHeads(Tensor y, Tensor out) {
        on("mergeHeads", y, out);
        HeadLayout l = Shapes.mergeHeads("mergeHeads", y, out);
        attention.mergeHeads(currentStream(), y, out, (int) l.b(), l.t(), l.heads(), l.hs());
    }

    @Override
    public void mergeHeadsBackward(Tensor dout, Tensor dy) {
        on("mergeHeadsBackward", dout, dy);
        HeadLayout l = Shapes.mergeHeads("mergeHeadsBackward", dy, dout);
        attention.mergeHeadsBackward(currentStream(), dout, dy, (int) l.b(), l.t(), l.heads(), l.hs());
    }

    @Override
    public void causalSoftmaxForward(Tensor preatt, Tensor att, float scale) {
        on("causalSoftmaxForward", preatt, att);
        int t = Shapes.causalSoftmax("causalSoftmaxForward", preatt, att);
        attention.causalSoftmaxForward(currentStream(), preatt, att, preatt.numel() / t, t, scale);
    }

    @Override
    public void causalSoftmaxBackward(Tensor att, Tensor datt, Tensor dpreatt, float scale) {
        on("causalSoftmaxBackward", att, datt, dpreatt);
        int t = Shapes.causalSoftmax("causalSoftmaxBackward", att, datt, dpreatt);
        attention.causalSoftmaxBackward(currentStream(), att, datt, dpreatt, att.numel() / t, t, scale);
    }

    @Override
    public void crossEntropyForward(Tensor logits, Tensor targets, Tensor losses) {
        on("crossEntropyForward", logits, targets, losses);
        int v = Shapes.crossEntropyForward(logits, targets, losses);
        crossEntropy.forward(currentStream(), logits, targets, losses, targets.numel(), v);
    }

    @Override
    public void crossEntropyBackward(Tensor logits, Tensor targets, float dloss, Tensor dlogits) {
        on("crossEntropyBackward", logits, targets, dlogits);
        int v = Shapes.crossEntropyBackward(logits, targets, dlogits);
        crossEntropy.backward(currentStream(), logits, targets, dloss, dlogits, targets.numel(), v);
    }

    // ------------------------------------------------------------------ optimizer and reductions

    @Override
    public void adamW(Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep step) {
        on("adamW", param, grad, m, v);
        Shapes.optimizer("adamW", param, grad, m, v);
        optimizer.adamW(currentStream(), param, grad, m, v, step);
    }

    @Override
    public void sgdMomentum(Tensor param, Tensor grad, Tensor momentumBuf, float lr, float momentum,
                            float weightDecay, float gradScale) {
        on("sgdMomentum", param, grad, momentumBuf);
        Shapes.optimizer("sgdMomentum", param, grad, momentumBuf);
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

    @Override
    public void sumInto(Tensor t, float scale, Tensor out) {
        reduceInto("sumInto", t, false, scale, out);
    }

    @Override
    public void sumOfSquaresInto(Tensor t, float scale, Tensor out) {
        reduceInto("sumOfSquaresInto", t, true, scale, out);
    }

    /** out[0] += scale · Σ t (or Σ t²), all on the device: the partials live in stream-ordered scratch. */
    private void reduceInto(String op, Tensor t, boolean squared, float scale, Tensor out) {
        on(op, t, out);
        Shapes.floating(op, t);
        Shapes.scalarF32(op, out);
        long partialFloats = 2L * ReductionLauncher.SUM_BLOCKS;          // doubles, as pairs of floats
        try (Tensor partials = allocate(DType.F32, MemoryCategory.WORKSPACE, partialFloats)) {
            reductions.sumInto(currentStream(), t, squared, partials, scale, out);
        }
    }

    private double reduce(String op, Tensor t, boolean squared) {
        on(op, t);
        Shapes.floating(op, t);
        CudaStream s = currentStream();
        long partialFloats = 2L * ReductionLauncher.SUM_BLOCKS;          // doubles, as pairs of floats
        try (Tensor scratch = allocate(DType.F32, MemoryCategory.WORKSPACE, partialFloats + 2)) {
            Tensor result = scratch.view(partialFloats, 2);
            reductions.sum(s, t, squared, scratch.view(0, partialFloats), result);
            try (PinnedStaging.Lease lease = download(result, s)) {
                return new DoublePointer(lease.bytes()).get(0);
            }
        }
    }

    @Override
    public boolean hasNonFinite(Tensor t) {
        on("hasNonFinite", t);
        Shapes.floating("hasNonFinite", t);
        CudaStream s = currentStream();
        try (Tensor flag = allocate(DType.I32, MemoryCategory.WORKSPACE, 1)) {
            CudaCheck.check(cudaMemsetAsync(ptr(flag), 0, 4, s.handle()), "cudaMemsetAsync(flag)", index);
            reductions.nonFinite(s, t, flag);
            try (PinnedStaging.Lease lease = download(flag, s)) {
                return new IntPointer(lease.bytes()).get(0) != 0;
            }
        }
    }

    // ------------------------------------------------------------------ streams and events

    @Override
    public Stream computeStream() {
        return compute;
    }

    @Override
    public Stream newStream(String streamName) {
        enter();
        CudaStream s = new CudaStream(streamName, index, this::beforeStreamDestroy, hostSyncs);
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

    /** How a column sum of k quantities over (rows, cols) spreads over this GPU's SMs (ColumnSums). */
    private ColumnSums.Plan columnSumPlan(long rows, int cols, int k) {
        return ColumnSums.plan(rows, cols, k, ColumnSums.chunks(rows, cols, multiprocessors),
                n -> allocate(DType.F32, MemoryCategory.WORKSPACE, n));
    }

    /** The CUDA ordinal of this backend's GPU. */
    int deviceIndex() {
        return index;
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
    public void synchronize() {
        hostSyncs.incrementAndGet();
        deviceSynchronize();
        if (GpuOpTimes.ENABLED) {
            GpuOpTimes.GLOBAL.afterHostWait(compute);
        }
    }

    private void deviceSynchronize() {
        enter();
        CudaCheck.check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", index);
    }

    @Override
    public long hostSyncs() {
        return hostSyncs.get();
    }

    @Override
    public long promotedCopies() {
        return promotedCopies.get();
    }

    /** Page-locked staging buffers pinned so far (steady after the first step). */
    public int pinnedStagingBuffers() {
        return staging.pinnedBuffers();
    }

    private void beforeStreamDestroy(CudaStream s) {
        enter();
        s.drain();
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
        deviceSynchronize();
        List<CudaStream> open;
        synchronized (streams) {
            open = new ArrayList<>(streams);
        }
        for (CudaStream s : open) {
            s.close();
        }
        compute.close();
        allocator.close();
        staging.close();
        module.close();
        CudaCheck.checkDriver(cuDevicePrimaryCtxRelease(driverDevice), "cuDevicePrimaryCtxRelease", index);
    }

    // ------------------------------------------------------------------ checks

    /**
     * Makes this GPU current on the calling thread for the runtime API and, through its primary
     * context, for the driver API our kernel launches use (cheap; CUDA keeps both per thread).
     */
    void enter() {
        CudaCheck.check(cudaSetDevice(index), "cudaSetDevice(" + index + ")", index);
        CudaCheck.checkDriver(cuCtxSetCurrent(primaryContext), "cuCtxSetCurrent", index);
    }

    private void on(String op, Tensor... ts) {
        if (closed) {
            throw new IllegalStateException(op + ": the backend of " + device + " is closed");
        }
        for (Tensor t : ts) {
            if (t != null) {   // an optional operand left out (an embedding without positions)
                DeviceTensors.requireOn(device, t, op);
            }
        }
        enter();
        if (GpuOpTimes.ENABLED && !op.equals("gemm") && !current.get().isClosed()) {   // gemm marks its shape
            GpuOpTimes.GLOBAL.mark(current.get(), op, 0);
        }
    }

    private static Pointer ptr(Tensor t) {
        return new DevicePointer(DeviceTensors.address(t));
    }
}
