// The reference backend: host memory from CpuStorage, GEMMs through OpenBLAS, every other op
// in plain Java on a ForkJoinPool of cpuThreads threads (the op classes of this package hold
// the math). Every call completes before it returns, so streams are names and events are
// already complete; the engine's ordering is still exercised through its own executors.
//
// Threads: several CPU backends (one per in-process rank) may live in one JVM, each created
// with cpuThreads = cores / N and each with its own pool of that many threads. OpenBLAS is set
// to one thread (a process-wide setting) and called from those pools, tile by tile (GemmOp),
// so N ranks never run more than N × cpuThreads threads, and results do not depend on the
// thread count.
package org.fsdp4j.backend.cpu;

import java.util.Objects;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Shapes;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Tensor;

public final class CpuBackend implements Backend {

    private final MemoryTracker tracker;
    private final CpuThreads threads;

    /** {@code cpuThreads} ≥ 1; the provider resolves 0 to all cores. Loads OpenBLAS. */
    public CpuBackend(MemoryTracker tracker, int cpuThreads) {
        this.tracker = Objects.requireNonNull(tracker, "tracker");
        OpenBlas.load();
        OpenBlas.useCallerThreadOnly();
        this.threads = new CpuThreads(cpuThreads);
    }

    @Override
    public String name() {
        String core = System.getenv("OPENBLAS_CORETYPE");
        return "cpu (OpenBLAS" + (core == null ? "" : " " + core) + ", " + threads.threads()
                + (threads.threads() == 1 ? " thread)" : " threads)");
    }

    @Override
    public Device device() {
        return Device.CPU;
    }

    @Override
    public MemoryTracker memory() {
        return tracker;
    }

    @Override
    public Tensor allocate(DType dtype, MemoryCategory category, long... shape) {
        threads.checkOpen();
        long numBytes = Math.multiplyExact(Tensor.numelOf(shape), dtype.byteSize());
        return Tensor.owning(CpuStorage.allocate(numBytes, category, tracker), dtype, shape);
    }

    @Override
    public void fill(Tensor t, float value) {
        ElementwiseOps.fill(threads, t, value);
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        ElementwiseOps.copy(threads, src, dst);
    }

    @Override
    public void copyFromHost(float[] src, int srcOffset, Tensor dst) {
        Shapes.hostRange("copyFromHost", src.length, srcOffset, dst);
        Shapes.floating("copyFromHost", dst);
        Elements e = Elements.of(dst);
        threads.forChunks(dst.numel(), ElementwiseOps.GRAIN,
                (c, from, to) -> e.store(src, srcOffset + (int) from, from, (int) (to - from)));
    }

    @Override
    public void copyFromHost(int[] src, int srcOffset, Tensor dst) {
        Shapes.hostRange("copyFromHost", src.length, srcOffset, dst);
        threads.checkOpen();
        Elements.of(dst).storeInts(src, srcOffset, 0, (int) dst.numel());
    }

    @Override
    public void copyToHost(Tensor src, float[] dst, int dstOffset) {
        Shapes.hostRange("copyToHost", dst.length, dstOffset, src);
        Shapes.floating("copyToHost", src);
        Elements e = Elements.of(src);
        threads.forChunks(src.numel(), ElementwiseOps.GRAIN,
                (c, from, to) -> e.load(from, dst, dstOffset + (int) from, (int) (to - from)));
    }

    @Override
    public void copyToHost(Tensor src, int[] dst, int dstOffset) {
        Shapes.hostRange("copyToHost", dst.length, dstOffset, src);
        threads.checkOpen();
        Elements.of(src).loadInts(0, dst, dstOffset, (int) src.numel());
    }

    @Override
    public void gemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch) {
        GemmOp.gemm(threads, tracker, transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB,
                beta, c, ldc, strideC, batch);
    }

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        ElementwiseOps.add(threads, a, b, out);
    }

    @Override
    public void scale(Tensor t, float alpha) {
        ElementwiseOps.scale(threads, t, alpha);
    }

    @Override
    public void addBias(Tensor out, Tensor bias) {
        ElementwiseOps.addBias(threads, out, bias);
    }

    @Override
    public void biasBackward(Tensor dout, Tensor dbias) {
        ElementwiseOps.biasBackward(threads, dout, dbias);
    }

    @Override
    public void geluForward(Tensor inp, Tensor out) {
        ElementwiseOps.geluForward(threads, inp, out);
    }

    @Override
    public void geluBackward(Tensor inp, Tensor dout, Tensor dinp) {
        ElementwiseOps.geluBackward(threads, inp, dout, dinp);
    }

    @Override
    public void layerNormForward(Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd) {
        LayerNormOps.forward(threads, inp, weight, bias, out, mean, rstd);
    }

    @Override
    public void layerNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                                  Tensor dinp, Tensor dweight, Tensor dbias) {
        LayerNormOps.backward(threads, dout, inp, weight, mean, rstd, dinp, dweight, dbias);
    }

    @Override
    public void embeddingForward(Tensor tokens, Tensor wte, Tensor wpe, Tensor out) {
        EmbeddingOps.forward(threads, tokens, wte, wpe, out);
    }

    @Override
    public void embeddingBackward(Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe) {
        EmbeddingOps.backward(threads, tokens, dout, dwte, dwpe);
    }

    @Override
    public void splitHeads(Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads) {
        AttentionOps.splitHeads(threads, qkv, q, k, v, numHeads);
    }

    @Override
    public void splitHeadsBackward(Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads) {
        AttentionOps.splitHeadsBackward(threads, dq, dk, dv, dqkv, numHeads);
    }

    @Override
    public void mergeHeads(Tensor y, Tensor out) {
        AttentionOps.mergeHeads(threads, y, out);
    }

    @Override
    public void mergeHeadsBackward(Tensor dout, Tensor dy) {
        AttentionOps.mergeHeadsBackward(threads, dout, dy);
    }

    @Override
    public void causalSoftmaxForward(Tensor preatt, Tensor att, float scale) {
        AttentionOps.causalSoftmaxForward(threads, preatt, att, scale);
    }

    @Override
    public void causalSoftmaxBackward(Tensor att, Tensor datt, Tensor dpreatt, float scale) {
        AttentionOps.causalSoftmaxBackward(threads, att, datt, dpreatt, scale);
    }

    @Override
    public void crossEntropyForward(Tensor logits, Tensor targets, Tensor losses) {
        CrossEntropyOps.forward(threads, logits, targets, losses);
    }

    @Override
    public void crossEntropyBackward(Tensor logits, Tensor targets, float dloss, Tensor dlogits) {
        CrossEntropyOps.backward(threads, logits, targets, dloss, dlogits);
    }

    @Override
    public void adamW(Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep step) {
        OptimizerOps.adamW(threads, param, grad, m, v, step);
    }

    @Override
    public void sgdMomentum(Tensor param, Tensor grad, Tensor momentumBuf, float lr, float momentum,
                            float weightDecay, float gradScale) {
        OptimizerOps.sgdMomentum(threads, param, grad, momentumBuf, lr, momentum, weightDecay, gradScale);
    }

    @Override
    public double sumOfSquares(Tensor t) {
        return ReductionOps.sumOfSquares(threads, t);
    }

    @Override
    public double sum(Tensor t) {
        return ReductionOps.sum(threads, t);
    }

    @Override
    public boolean hasNonFinite(Tensor t) {
        return ReductionOps.hasNonFinite(threads, t);
    }

    // ---- streams and events: every CPU call has completed when it returns

    @Override
    public Stream newStream(String name) {
        return new CpuStream(Objects.requireNonNull(name, "stream name"));
    }

    @Override
    public void setStream(Stream stream) {
        if (stream != null && !(stream instanceof CpuStream)) {
            throw new IllegalArgumentException("setStream: " + stream.name() + " is not a CPU stream");
        }
    }

    @Override
    public Event record() {
        return CompletedEvent.INSTANCE;
    }

    @Override
    public void waitFor(Event event) {
        if (!(event instanceof CompletedEvent)) {
            throw new IllegalArgumentException("waitFor: " + event + " is not a CPU event");
        }
    }

    @Override
    public void synchronize() {
        threads.checkOpen();
    }

    @Override
    public void close() {
        threads.close();
    }

    @Override
    public String toString() {
        return name();
    }

    private record CpuStream(String name) implements Stream {
        @Override
        public void close() {
            // nothing to destroy: a CPU stream is only a name
        }
    }

    private enum CompletedEvent implements Event {
        INSTANCE;

        @Override
        public void synchronize() {
            // the work before it finished when the recording call returned
        }
    }
}
