// Deterministic column sums over many rows: each fixed chunk of rows sums into its own fp64
// partial, and the partials are combined in chunk order, so the result does not depend on
// which thread ran which chunk. Serves biasBackward, LayerNorm's dweight/dbias and RMSNorm's dweight.
// The partials are kept by the thread that ran the op for its next one (no garbage per call).
package org.fsdp4j.backend.cpu;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Iterator;
import org.fsdp4j.api.Tensor;

final class ColumnSums {

    /**
     * Rows per chunk at least: each chunk sums into a partial of {@code cols} doubles that is
     * later added in, so chunks of the pointwise grain alone (10 rows at 1536 columns) made a bias
     * backward spend more time combining partials than summing rows.
     */
    static final long MIN_ROWS_PER_CHUNK = 64;

    /** Partial sets a thread keeps for its next ops (a LayerNorm's backward holds two at once). */
    private static final int KEPT_PER_THREAD = 4;
    /**
     * The most bytes of kept sets per thread: a Linear bias or a norm of a few thousand columns
     * (33 chunks × 3072 columns is 0.8 MB) is kept; a vocabulary-wide bias is allocated per op as
     * before rather than held on the heap for the rest of the run.
     */
    private static final long KEPT_BYTES_PER_THREAD = 4L << 20;

    /**
     * Each thread's partial sets, reused op after op: allocating them afresh was two thirds of a
     * training step's garbage (a (chunks, cols) fp64 set per bias or LayerNorm backward: 55 of the
     * 85 MB that 6 s of `small` T = 256 N = 2 steps allocated), which the young generation had to
     * be sized for.
     */
    private static final ThreadLocal<ArrayDeque<double[][]>> KEPT = ThreadLocal.withInitial(ArrayDeque::new);

    final long rows;
    final int cols;
    final long rowsPerChunk;
    private final int chunks;
    private final double[][] partials;   // (≥ chunks + 1, cols): chunk c's accumulator, then the total

    ColumnSums(long rows, int cols) {
        this.rows = rows;
        this.cols = cols;
        this.rowsPerChunk = Math.max(MIN_ROWS_PER_CHUNK, CpuThreads.rowsPerChunk(cols, ElementwiseOps.GRAIN));
        this.chunks = CpuThreads.chunkCount(rows, rowsPerChunk);
        this.partials = take(chunks + 1, cols);
    }

    /** The accumulator of chunk {@code c}, zero until the chunk adds to it. */
    double[] partial(int c) {
        return partials[c];
    }

    /** dst (cols) += Σ partials, combined in chunk order; the partials go back to this thread's set. */
    void addTo(Tensor dst) {
        double[] total = partials[chunks];
        for (int c = 0; c < chunks; c++) {
            double[] p = partials[c];
            for (int j = 0; j < cols; j++) {
                total[j] += p[j];
            }
        }
        Elements e = Elements.of(dst);
        float[] d = Scratch.floats(0, cols);   // the chunks (their slot 0 too) are done
        e.load(0, d, 0, cols);
        for (int j = 0; j < cols; j++) {
            d[j] = (float) (d[j] + total[j]);
        }
        e.store(d, 0, 0, cols);
        ArrayDeque<double[][]> kept = KEPT.get();
        long bytes = bytes(partials);
        for (double[][] set : kept) {
            bytes += bytes(set);
        }
        if (kept.size() < KEPT_PER_THREAD && bytes <= KEPT_BYTES_PER_THREAD) {
            kept.push(partials);
        }
    }

    private static long bytes(double[][] set) {
        return (long) set.length * set[0].length * Double.BYTES;   // every set has the total's row
    }

    /** A zeroed (≥ n, cols) set from this thread's, or a new one. */
    private static double[][] take(int n, int cols) {
        ArrayDeque<double[][]> kept = KEPT.get();
        for (Iterator<double[][]> it = kept.iterator(); it.hasNext(); ) {
            double[][] set = it.next();
            if (set.length >= n && set[0].length == cols) {
                it.remove();
                for (int c = 0; c < n; c++) {
                    Arrays.fill(set[c], 0.0);
                }
                return set;
            }
        }
        return new double[n][cols];
    }
}
