// Strided-batched GEMM on CPU tensors: checks every leading dim, stride and extent against the
// tensors, then calls OpenBLAS sgemm once per batch. fp32 operands are passed in place; a half
// operand is widened into an fp32 WORKSPACE temporary first, and a half C is rounded back
// (only its m×n elements per batch, so the gaps a larger ldc leaves are never touched).
package org.fsdp4j.backend.cpu;

import org.bytedeco.javacpp.FloatPointer;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Tensor;

final class GemmOp {

    private GemmOp() {
    }

    static void gemm(CpuThreads threads, MemoryTracker tracker,
                     boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch) {
        threads.checkOpen();
        Shapes.floating("gemm", a, b, c);
        if (m < 0 || n < 0 || k < 0 || batch < 0) {
            throw Shapes.error("gemm", "negative size m=" + m + " n=" + n + " k=" + k + " batch=" + batch, a, b, c);
        }
        long spanA = span("A", a, transA ? k : m, transA ? m : k, lda, strideA, batch, a, b, c);
        long spanB = span("B", b, transB ? n : k, transB ? k : n, ldb, strideB, batch, a, b, c);
        long spanC = span("C", c, m, n, ldc, strideC, batch, a, b, c);
        if (batch > 1 && strideC < extent(m, n, ldc)) {
            throw Shapes.error("gemm", "strideC=" + strideC + " makes the " + batch + " outputs overlap (each spans "
                    + extent(m, n, ldc) + " elements)", a, b, c);
        }
        checkDisjoint("A", a, spanA, c, spanC, b);
        checkDisjoint("B", b, spanB, c, spanC, a);
        if (m == 0 || n == 0 || batch == 0) {
            return;
        }
        try (Operand pa = new Operand(threads, tracker, a, spanA, true);
             Operand pb = new Operand(threads, tracker, b, spanB, true);
             Operand pc = new Operand(threads, tracker, c, spanC, beta != 0f)) {
            for (int i = 0; i < batch; i++) {
                OpenBlas.sgemm(transA, transB, m, n, k, alpha, pa.at(i * strideA), Math.max(1, lda),
                        pb.at(i * strideB), Math.max(1, ldb), beta, pc.at(i * strideC), Math.max(1, ldc));
            }
            pc.writeBack(m, n, ldc, strideC, batch);
        }
    }

    /** Elements a stored rows×cols matrix with row stride ld spans. */
    static long extent(long rows, long cols, long ld) {
        return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
    }

    /**
     * Checks one operand's ld, stride and total extent; returns how many elements of it the batch
     * reads. ld may be 0 for an empty operand (k = 0 with tight dims); OpenBLAS then gets 1.
     */
    private static long span(String name, Tensor x, long rows, long cols, int ld, long stride, int batch, Tensor... all) {
        if (ld < cols || ld < 0) {
            throw Shapes.error("gemm", "ld" + name.toLowerCase(java.util.Locale.ROOT) + "=" + ld
                    + " is smaller than the " + cols + " columns " + name + " is stored with", all);
        }
        if (stride < 0) {
            throw Shapes.error("gemm", "stride" + name + "=" + stride + " is negative", all);
        }
        long total = batch == 0 ? 0 : (batch - 1) * stride + extent(rows, cols, ld);
        if (total > x.numel()) {
            throw Shapes.error("gemm", name + " (" + rows + "×" + cols + ", ld " + ld + ", stride " + stride + ", batch "
                    + batch + ") needs " + total + " elements but has " + x.numel(), all);
        }
        return total;
    }

    private static void checkDisjoint(String name, Tensor x, long spanX, Tensor c, long spanC, Tensor other) {
        if (x.storage() != c.storage() || spanX == 0 || spanC == 0) {
            return;
        }
        long x0 = x.byteOffset();
        long x1 = x0 + spanX * x.dtype().byteSize();
        long c0 = c.byteOffset();
        long c1 = c0 + spanC * c.dtype().byteSize();
        if (x0 < c1 && c0 < x1) {
            throw Shapes.error("gemm", "C overlaps " + name + " in the same storage; write C to another buffer",
                    x, other, c);
        }
    }

    /** One GEMM operand as fp32 memory: the tensor itself, or a widened WORKSPACE copy of a half tensor. */
    private static final class Operand implements AutoCloseable {
        private final CpuThreads threads;
        private final Tensor tensor;
        private final Tensor widened;        // (span) F32, null when the tensor is F32 already
        private final FloatPointer pointer;  // moved by at(); its position is in floats
        private final long base;             // element offset of the tensor within the pointer's memory

        Operand(CpuThreads threads, MemoryTracker tracker, Tensor tensor, long span, boolean readValues) {
            this.threads = threads;
            this.tensor = tensor;
            if (tensor.dtype() == DType.F32) {
                this.widened = null;
                this.base = tensor.offset();
                this.pointer = new FloatPointer(CpuStorage.of(tensor).pointer());
            } else {
                this.widened = Tensor.owning(CpuStorage.allocate(Math.max(1, span) * 4, MemoryCategory.WORKSPACE,
                        tracker), DType.F32, span);
                if (readValues && span > 0) {
                    ElementwiseOps.copy(threads, tensor.view(0, span), widened);
                }
                this.base = 0;
                this.pointer = new FloatPointer(CpuStorage.of(widened).pointer());
            }
        }

        FloatPointer at(long element) {
            return pointer.position(base + element);
        }

        /** Rounds the m×n elements of each batch back into a half C. */
        void writeBack(int m, int n, int ld, long stride, int batch) {
            if (widened == null) {
                return;
            }
            Elements src = Elements.of(widened);
            Elements dst = Elements.of(tensor);
            threads.forChunks((long) batch * m, Shapes.rowsPerChunk(n, ElementwiseOps.GRAIN), (chunk, from, to) -> {
                float[] row = Scratch.floats(0, n);
                for (long r = from; r < to; r++) {
                    long at = (r / m) * stride + (r % m) * ld;
                    src.load(at, row, 0, n);
                    dst.store(row, 0, at, n);
                }
            });
        }

        @Override
        public void close() {
            if (widened != null) {
                widened.close();
            }
        }
    }
}
