// How a column sum (the bias, LayerNorm and RMSNorm parameter gradients: Σ over rows of a
// (rows, cols) matrix) spreads over the GPU. One block per 32 columns gave a 768-wide LayerNorm
// 24 blocks on an H200's 132 SMs, each thread summing rows/16 rows one after another: the
// LayerNorm backward took 17 ms of a 209-ms step at 1B and the bias backward 5.
// So the rows are cut into chunks, each with its own blocks (grid y), until the grid holds
// about BLOCKS_PER_SM blocks per SM; each chunk writes its partial sums to a workspace
// (chunks, K, cols) and column_partials_kernel adds them in chunk order. The chunking depends only
// on the shape and the SM count, so the sums are the same bits on every run on one GPU.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import java.util.function.LongFunction;
import org.fsdp4j.api.Tensor;

final class ColumnSums {

    /** Must match COLSUM_TX / COLSUM_TY in common.cuh. */
    static final int TX = 32;
    static final int TY = 16;
    static final int BLOCKS_PER_SM = 4;
    /** A chunk below this many rows would spend more on its partials than on its sums. */
    static final long MIN_ROWS_PER_CHUNK = 256;
    private static final int MAX_CHUNKS = 65535;   // grid y

    private ColumnSums() {
    }

    /**
     * One column sum's launch: row chunks (grid y), rows per chunk, and with several chunks the
     * float workspace (chunks, k, cols) for the partial sums. Close it after the launches.
     */
    record Plan(int chunks, long rowsPerChunk, int k, Tensor partials) implements AutoCloseable {
        long partialsAddress() {
            return partials == null ? 0L : address(partials);
        }

        @Override
        public void close() {
            if (partials != null) {
                partials.close();
            }
        }
    }

    /** Row chunks for a sum of {@code rows} rows over {@code cols} columns on a GPU with that many SMs. */
    static int chunks(long rows, int cols, int multiprocessors) {
        long columnBlocks = Grid.ceilDiv(cols, TX);
        long wanted = Grid.ceilDiv((long) BLOCKS_PER_SM * Math.max(1, multiprocessors), columnBlocks);
        long most = Math.max(1, rows / MIN_ROWS_PER_CHUNK);
        return (int) Math.max(1, Math.min(Math.min(wanted, most), MAX_CHUNKS));
    }

    /** The plan for {@code chunks} chunks; {@code floats} allocates an F32 workspace of that many elements. */
    static Plan plan(long rows, int cols, int k, int chunks, LongFunction<Tensor> floats) {
        if (chunks <= 1) {
            return new Plan(1, Math.max(1, rows), k, null);
        }
        long rowsPerChunk = Grid.ceilDiv(rows, chunks);
        return new Plan(chunks, rowsPerChunk, k, floats.apply((long) chunks * k * cols));
    }

    /** Adds the plan's partial sums to out0 (and out1 when k = 2); nothing with one chunk. */
    static void finish(Kernel partialsKernel, CudaStream s, Plan p, int cols, Tensor out0, Tensor out1) {
        if (p.partials() == null) {
            return;
        }
        partialsKernel.launchStrided(s, (long) p.k() * cols, address(p.partials()), p.chunks(), p.k(), cols,
                address(out0), code(out0), out1 == null ? 0L : address(out1), out1 == null ? 0 : code(out1));
    }
}
