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

    /** Blocks for one warp per row, THREADS / 32 rows per block. */
    static long warpPerRow(long rows) {
        return Math.max(1, ceilDiv(rows, THREADS / 32));
    }
}
