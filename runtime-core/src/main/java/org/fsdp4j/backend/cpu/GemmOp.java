// Strided-batched GEMM on CPU tensors: checks every leading dim, stride and extent against the
// tensors, then runs single-threaded calls on the backend's own threads, one per (batch, tile of
// C): PanelGemm (Java, register-tiled) for fp32 products of Linear size, OpenBLAS's sgemm for the
// rest (chosen on the whole product, so the same for every tile and thread count). A C matrix is
// cut into at most one tile per thread of the backend (and per core): a rank with one thread runs
// each GEMM as one call, which in a training step ran 5% faster than two tiles one after the
// other. Every tile keeps the whole k-sum, and neither OpenBLAS's nor
// PanelGemm's result for an element depends on the extent of the call it is computed in (checked
// on random shapes and tilings, by PanelGemmTest, and by CpuDeterminismTest at 1, 2 and 3
// threads), so the result has the same bits for any thread count (OpenBLAS's own threading does
// not: it changes the blocking with the thread count), and batched attention GEMMs parallelise
// over the batch. fp32 operands are read in place; a half operand is widened while it is packed,
// tile by tile, into per-thread fp32 scratch (as a GEMM packs its panels anyway), and a half C
// tile is rounded back once (only its own elements, so the gaps a larger ldc leaves are never
// touched): no operand is ever copied whole.
package org.fsdp4j.backend.cpu;

import java.nio.FloatBuffer;
import org.bytedeco.javacpp.FloatPointer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;

final class GemmOp {

    /**
     * Tiling of one C matrix: a tile side stays >= MIN_TILE, a tile does >= MIN_TILE_FLOPS of work,
     * and a matrix is cut into at most MAX_TILES tiles, one per core of the machine, and at most one
     * per thread of the backend: each tile re-packs its panels of A and B, so more tiles than
     * threads cost more than they gain (8 tiles instead of 2 on 2 cores made the Linear GEMMs of
     * `small` 10% slower with 2 threads and 14% slower with 1; one tile instead of two on one thread
     * ran 5% faster).
     */
    static final int MIN_TILE = 128;
    static final double MIN_TILE_FLOPS = 32e6;
    static final int MAX_TILES = Math.max(1, Math.min(64, Runtime.getRuntime().availableProcessors()));

    /** Work per chunk of the task loop: below this, tasks are batched together (less scheduling). */
    private static final double MIN_FLOPS_PER_CHUNK = 4e6;

    /** Per-thread native fp32 panels for half operands: [0] A, [1] B, [2] C. */
    private static final ThreadLocal<FloatPointer[]> PANELS = ThreadLocal.withInitial(() -> new FloatPointer[3]);

    private GemmOp() {
    }

    static void gemm(CpuThreads threads, boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch, GemmEpilogue epilogue) {
        threads.checkOpen();
        Shapes.gemm(transA, transB, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC, batch);
        if (m == 0 || n == 0 || batch == 0) {
            return;
        }
        Operand pa = new Operand(a);
        Operand pb = new Operand(b);
        Operand pc = new Operand(c);
        // C is cut into tilesM × tilesN tiles; each task is one (batch, tile)
        int[] tiling = tiling(m, n, k, Math.min(MAX_TILES, threads.threads()));
        int tilesM = tiling[0];
        int tilesN = tiling[1];
        int rowsPerTile = (m + tilesM - 1) / tilesM;
        int colsPerTile = (n + tilesN - 1) / tilesN;
        int perBatch = tilesM * tilesN;
        double flopsPerTask = 2.0 * rowsPerTile * colsPerTile * Math.max(1, k);
        long grain = Math.max(1, (long) (MIN_FLOPS_PER_CHUNK / flopsPerTask));
        boolean panel = !pa.half && !pb.half && !pc.half && PanelGemm.suits(m, n, k);
        boolean fp32 = !pa.half && !pb.half && !pc.half;
        if (epilogue != null && !(fp32 && alpha == 1f && beta == 0f && batch == 1 && epilogue.fits(n))) {
            throw new IllegalArgumentException("an epilogue (a bias, a GELU) is applied as C is written only by a single"
                    + " fp32 product with alpha 1 and beta 0 (Ops.gemmThenAddBias, gemmThenAddBiasGelu,"
                    + " gemmThenGeluBackward)");
        }
        boolean share = threads.threads() == 1;   // one thread: a call's row blocks may go to blocked ranks (CoreShare)
        threads.forChunks((long) batch * perBatch, grain, (chunk, from, to) -> {
            for (long task = from; task < to; task++) {
                long p = task / perBatch;
                int tile = (int) (task % perBatch);
                int i0 = (tile / tilesN) * rowsPerTile;
                int j0 = (tile % tilesN) * colsPerTile;
                int rows = Math.min(m, i0 + rowsPerTile) - i0;
                int cols = Math.min(n, j0 + colsPerTile) - j0;
                if (panel) {
                    PanelGemm.sgemm(transA, transB, rows, cols, k, alpha,
                            pa.floats, pa.offset + p * strideA + (transA ? i0 : (long) i0 * lda), lda,
                            pb.floats, pb.offset + p * strideB + (transB ? (long) j0 * ldb : j0), ldb,
                            beta, pc.floats, pc.offset + p * strideC + (long) i0 * ldc + j0, ldc, share, epilogue, j0);
                    continue;
                }
                // op(A) rows [i0, i0+rows) × k: stored rows (N) or columns (T) of A_p
                FloatPointer ap = transA ? pa.panel(0, p * strideA + i0, lda, k, rows)
                        : pa.panel(0, p * strideA + (long) i0 * lda, lda, rows, k);
                int ldA = pa.half ? (transA ? rows : k) : Math.max(1, lda);
                // op(B) k × columns [j0, j0+cols)
                FloatPointer bp = transB ? pb.panel(1, p * strideB + (long) j0 * ldb, ldb, cols, k)
                        : pb.panel(1, p * strideB + j0, ldb, k, cols);
                int ldB = pb.half ? (transB ? k : cols) : Math.max(1, ldb);
                long offC = p * strideC + (long) i0 * ldc + j0;
                FloatPointer cp = pc.half && beta == 0f ? pc.scratch(2, (long) rows * cols)
                        : pc.panel(2, offC, ldc, rows, cols);
                int ldC = pc.half ? cols : Math.max(1, ldc);
                OpenBlas.sgemm(transA, transB, rows, cols, k, alpha, ap, ldA, bp, ldB, beta, cp, ldC);
                if (pc.half) {
                    pc.unpack(cp, offC, ldc, rows, cols);
                } else if (epilogue != null) {
                    finishTile(epilogue, pc.floats, pc.offset + offC, ldc, rows, cols, j0);
                }
            }
        });
    }

    /**
     * Applies {@code epilogue} to a tile OpenBLAS has just written (rows × cols at c[at ..], row
     * stride ldc; the product's columns from col), a row at a time through the thread's scratch,
     * as PanelGemm hands it its row blocks: the bits of the unfused ops, one pass over C fewer.
     */
    private static void finishTile(GemmEpilogue epilogue, FloatBuffer c, long at, int ldc, int rows, int cols,
                                   int col) {
        float[] row = Scratch.floats(0, cols);      // slot 0: PanelGemm's and half operands', neither runs here
        for (int i = 0; i < rows; i++) {
            long from = at + (long) i * ldc;
            c.get((int) from, row, 0, cols);
            epilogue.finish(row, cols, 1, cols, c, from, ldc, col);
        }
    }

    /**
     * {tilesM, tilesN} for an m×n C with inner dim k and at most {@code maxTiles} tiles: halve the
     * longer tile side while the tile count stays within the work budget.
     */
    static int[] tiling(int m, int n, int k, int maxTiles) {
        double flops = 2.0 * m * n * Math.max(1, k);
        int budget = (int) Math.max(1, Math.min(maxTiles, flops / MIN_TILE_FLOPS));
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

    /** One GEMM operand: fp32 memory used in place, or a half tensor packed per tile into fp32 scratch. */
    private static final class Operand {
        final boolean half;
        private final Elements elements;
        private final FloatPointer base;     // fp32: the storage's start
        final FloatBuffer floats;            // fp32: the storage's elements (PanelGemm reads them here)
        final long offset;                   // fp32: the tensor's element offset within it

        Operand(Tensor t) {
            this.half = t.dtype() != DType.F32;
            this.elements = Elements.of(t);
            this.base = half ? null : new FloatPointer(CpuStorage.of(t).pointer());
            this.floats = half ? null : CpuStorage.of(t).floats();
            this.offset = t.offset();
        }

        /**
         * The region of {@code rowCount} runs of {@code rowLength} elements, run r starting at
         * start + r·ld: in place for fp32 (positioned at start, leading dim ld), else packed
         * densely (leading dim rowLength) into this thread's panel {@code slot}.
         */
        FloatPointer panel(int slot, long start, int ld, int rowCount, int rowLength) {
            if (!half) {
                return new FloatPointer(base).position(offset + start);
            }
            FloatPointer out = scratch(slot, (long) rowCount * rowLength);
            float[] row = Scratch.floats(0, rowLength);
            for (int r = 0; r < rowCount; r++) {
                elements.load(start + (long) r * ld, row, 0, rowLength);
                out.position((long) r * rowLength).put(row, 0, rowLength);
            }
            return out.position(0);
        }

        /** Rounds a packed rows × cols fp32 tile back into the half tensor at start (leading dim ld). */
        void unpack(FloatPointer tile, long start, int ld, int rows, int cols) {
            float[] row = Scratch.floats(0, cols);
            for (int r = 0; r < rows; r++) {
                tile.position((long) r * cols).get(row, 0, cols);
                elements.store(row, 0, start + (long) r * ld, cols);
            }
            tile.position(0);
        }

        /** This thread's fp32 panel {@code slot} with room for {@code floats} elements, positioned at 0. */
        FloatPointer scratch(int slot, long floats) {
            FloatPointer[] panels = PANELS.get();
            FloatPointer p = panels[slot];
            if (p == null || p.capacity() < floats) {
                if (p != null) {
                    p.close();
                }
                p = new FloatPointer(Math.max(1, floats));
                panels[slot] = p;
            }
            return p.position(0);
        }
    }
}
