// Launch-shape arithmetic shared by the launchers: grid-stride kernels get enough blocks to
// fill any GPU we build for, capped so huge buffers loop instead of overflowing the grid.
package org.fsdp4j.cuda;

final class Grid {

    /** Threads per block for elementwise kernels. */
    static final int THREADS = 256;
    /** Enough resident blocks for 132 SMs × 16 blocks with room to spare; beyond, threads loop. */
    static final long MAX_BLOCKS = 1L << 16;

    private Grid() {
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    /** Blocks for a grid-stride loop over n elements. */
    static long strided(long n) {
        return Math.max(1, Math.min(ceilDiv(n, THREADS), MAX_BLOCKS));
    }

    /** Grid y for a row-by-row kernel: a block row per row, at most CUDA's 65535 (beyond, rows stride). */
    static int rows(long rows) {
        return (int) Math.max(1, Math.min(rows, 65535));
    }

    /** Grid x for a row-by-row kernel: THREADS columns a block, threads striding beyond 64 blocks. */
    static long rowColumns(long cols) {
        return Math.max(1, Math.min(ceilDiv(cols, THREADS), 64));
    }

    /** Blocks for one warp per row, THREADS / 32 rows per block. */
    static long warpPerRow(long rows) {
        return Math.max(1, ceilDiv(rows, THREADS / 32));
    }
}
