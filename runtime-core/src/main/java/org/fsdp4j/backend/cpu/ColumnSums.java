// Deterministic column sums over many rows: each fixed chunk of rows sums into its own fp64
// partial, and the partials are combined in chunk order, so the result does not depend on
// which thread ran which chunk. Serves biasBackward, LayerNorm's dweight/dbias and RMSNorm's dweight.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.api.Tensor;

final class ColumnSums {

    /**
     * Rows per chunk at least: each chunk allocates and later adds in a partial of {@code cols}
     * doubles, so chunks of the pointwise grain alone (10 rows at 1536 columns) made a bias
     * backward allocate 1.3 MB a call and spend more time combining partials than summing rows.
     */
    static final long MIN_ROWS_PER_CHUNK = 64;

    final long rows;
    final int cols;
    final long rowsPerChunk;
    private final double[][] partials;   // (chunks, cols)

    ColumnSums(long rows, int cols) {
        this.rows = rows;
        this.cols = cols;
        this.rowsPerChunk = Math.max(MIN_ROWS_PER_CHUNK, CpuThreads.rowsPerChunk(cols, ElementwiseOps.GRAIN));
        this.partials = new double[CpuThreads.chunkCount(rows, rowsPerChunk)][];
    }

    /** The accumulator of chunk {@code c} (zeroed on first use). */
    double[] partial(int c) {
        if (partials[c] == null) {
            partials[c] = new double[cols];
        }
        return partials[c];
    }

    /** dst (cols) += Σ partials, combined in chunk order. */
    void addTo(Tensor dst) {
        double[] total = new double[cols];
        for (double[] p : partials) {
            if (p != null) {
                for (int j = 0; j < cols; j++) {
                    total[j] += p[j];
                }
            }
        }
        Elements e = Elements.of(dst);
        float[] d = new float[cols];
        e.load(0, d, 0, cols);
        for (int j = 0; j < cols; j++) {
            d[j] = (float) (d[j] + total[j]);
        }
        e.store(d, 0, 0, cols);
    }
}
