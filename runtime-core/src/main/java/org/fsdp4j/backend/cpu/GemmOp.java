// Strided-batched GEMM on CPU tensors: checks every leading dim, stride and extent against the
// tensors, then runs single-threaded OpenBLAS sgemm calls on the backend's own threads, one per
// (batch, tile of C). Tiles are a function of the shape only and each keeps the whole k-sum, so
// the result has the same bits for any thread count (OpenBLAS's own threading does not: it
// changes the blocking with the thread count), and batched attention GEMMs parallelise over the
// batch. fp32 operands are passed in place; a half operand is widened into an fp32 WORKSPACE
// temporary first, and a half C is rounded back (only its m×n elements per batch, so the gaps a
// larger ldc leaves are never touched).
package org.fsdp4j.backend.cpu;

import org.bytedeco.javacpp.FloatPointer;
import org.fsdp4j.backend.Shapes;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Tensor;

final class GemmOp {

    /**
     * Tiling of one C matrix: a tile side stays >= MIN_TILE, a tile does >= MIN_TILE_FLOPS of work
     * (each tile re-packs its panels of A and B, so small tiles cost more than they gain), and a
     * matrix is cut into at most MAX_TILES tiles.
     */
    static final int MIN_TILE = 128;
    static final double MIN_TILE_FLOPS = 32e6;
    static final int MAX_TILES = 8;

    /** Work per chunk of the task loop: below this, tasks are batched together (less scheduling). */
    private static final double MIN_FLOPS_PER_CHUNK = 4e6;

    private GemmOp() {
    }

    static void gemm(CpuThreads threads, MemoryTracker tracker,
                     boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch) {
        threads.checkOpen();
        Shapes.GemmSpans spans = Shapes.gemm(transA, transB, m, n, k, a, lda, strideA, b, ldb, strideB,
                c, ldc, strideC, batch);
        long spanA = spans.a();
        long spanB = spans.b();
        long spanC = spans.c();
        if (m == 0 || n == 0 || batch == 0) {
            return;
        }
        try (Operand pa = new Operand(threads, tracker, a, spanA, true);
             Operand pb = new Operand(threads, tracker, b, spanB, true);
             Operand pc = new Operand(threads, tracker, c, spanC, beta != 0f)) {
            // C is cut into tilesM × tilesN tiles; each task is one (batch, tile)
            int[] tiling = tiling(m, n, k);
            int tilesM = tiling[0];
            int tilesN = tiling[1];
            int rowsPerTile = (m + tilesM - 1) / tilesM;
            int colsPerTile = (n + tilesN - 1) / tilesN;
            int perBatch = tilesM * tilesN;
            double flopsPerTask = 2.0 * rowsPerTile * colsPerTile * Math.max(1, k);
            long grain = Math.max(1, (long) (MIN_FLOPS_PER_CHUNK / flopsPerTask));
            int ldA = Math.max(1, lda);
            int ldB = Math.max(1, ldb);
            int ldC = Math.max(1, ldc);
            threads.forChunks((long) batch * perBatch, grain, (chunk, from, to) -> {
                for (long task = from; task < to; task++) {
                    long p = task / perBatch;
                    int tile = (int) (task % perBatch);
                    int i0 = (tile / tilesN) * rowsPerTile;
                    int j0 = (tile % tilesN) * colsPerTile;
                    int rows = Math.min(m, i0 + rowsPerTile) - i0;
                    int cols = Math.min(n, j0 + colsPerTile) - j0;
                    long offA = p * strideA + (transA ? i0 : (long) i0 * lda);
                    long offB = p * strideB + (transB ? (long) j0 * ldb : j0);
                    long offC = p * strideC + (long) i0 * ldc + j0;
                    OpenBlas.sgemm(transA, transB, rows, cols, k, alpha, pa.at(offA), ldA, pb.at(offB), ldB,
                            beta, pc.at(offC), ldC);
                }
            });
            pc.writeBack(m, n, ldc, strideC, batch);
        }
    }

    /**
     * {tilesM, tilesN} for an m×n C with inner dim k, from the shape alone (never the thread
     * count): halve the longer tile side while the tile count stays within the work budget.
     */
    static int[] tiling(int m, int n, int k) {
        double flops = 2.0 * m * n * Math.max(1, k);
        int budget = (int) Math.max(1, Math.min(MAX_TILES, flops / MIN_TILE_FLOPS));
        int tilesM = 1;
        int tilesN = 1;
        while (tilesM * tilesN * 2 <= budget) {
            int rows = m / tilesM;
            int cols = n / tilesN;
            if (rows >= cols && rows >= 2 * MIN_TILE) {
                tilesM *= 2;
            } else if (cols >= 2 * MIN_TILE) {
                tilesN *= 2;
            } else if (rows >= 2 * MIN_TILE) {
                tilesM *= 2;
            } else {
                break;
            }
        }
        return new int[] {tilesM, tilesN};
    }

    /** One GEMM operand as fp32 memory: the tensor itself, or a widened WORKSPACE copy of a half tensor. */
    private static final class Operand implements AutoCloseable {
        private final CpuThreads threads;
        private final Tensor tensor;
        private final Tensor widened;        // (span) F32, null when the tensor is F32 already
        private final FloatPointer pointer;  // the memory's start; at() hands out positioned copies
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

        /** A pointer to element {@code element} of the operand (a fresh object: tasks run concurrently). */
        FloatPointer at(long element) {
            return new FloatPointer(pointer).position(base + element);
        }

        /** Rounds the m×n elements of each batch back into a half C. */
        void writeBack(int m, int n, int ld, long stride, int batch) {
            if (widened == null) {
                return;
            }
            Elements src = Elements.of(widened);
            Elements dst = Elements.of(tensor);
            threads.forChunks((long) batch * m, CpuThreads.rowsPerChunk(n, ElementwiseOps.GRAIN), (chunk, from, to) -> {
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
