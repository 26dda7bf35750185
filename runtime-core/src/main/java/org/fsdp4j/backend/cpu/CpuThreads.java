// The CPU backend's parallel loops. Work is cut into chunks whose boundaries depend only on
// the problem size and a fixed grain, never on the thread count, and reductions combine the
// per-chunk partials in chunk order: results are bit-identical whatever the scheduling and
// however many threads run (1 thread and 8 threads give the same bits).
package org.fsdp4j.backend.cpu;

import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.concurrent.RecursiveAction;
import java.util.concurrent.atomic.AtomicInteger;

final class CpuThreads implements AutoCloseable {

    /** The body of a chunked loop: handles items [from, to) of chunk number {@code chunk}. */
    @FunctionalInterface
    interface ChunkBody {
        void run(int chunk, long from, long to);
    }

    /** A chunk's contribution to a sum. */
    @FunctionalInterface
    interface ChunkSum {
        double sum(long from, long to);
    }

    private static final AtomicInteger POOL_IDS = new AtomicInteger();

    private final int threads;
    private final ForkJoinPool pool;   // null when single-threaded: everything runs on the caller
    private volatile boolean closed;

    CpuThreads(int threads) {
        if (threads < 1) {
            throw new IllegalArgumentException("need at least one CPU thread, got " + threads);
        }
        this.threads = threads;
        if (threads == 1) {
            this.pool = null;
        } else {
            String prefix = "fsdp4j-cpu" + POOL_IDS.incrementAndGet() + "-";
            this.pool = new ForkJoinPool(threads, p -> {
                ForkJoinWorkerThread t = ForkJoinPool.defaultForkJoinWorkerThreadFactory.newThread(p);
                t.setName(prefix + t.getPoolIndex());
                return t;
            }, null, false);
        }
    }

    int threads() {
        return threads;
    }

    /** Items per chunk so that a chunk handles about {@code targetElements} elements of rows of {@code rowLength}. */
    static long rowsPerChunk(long rowLength, long targetElements) {
        return Math.max(1, targetElements / Math.max(1, rowLength));
    }

    static int chunkCount(long n, long grain) {
        return n <= 0 ? 0 : Math.toIntExact((n + grain - 1) / grain);
    }

    /** Runs {@code body} over [0, n) in chunks of {@code grain} items (the last may be shorter). */
    void forChunks(long n, long grain, ChunkBody body) {
        checkOpen();
        if (grain < 1) {
            throw new IllegalArgumentException("grain must be >= 1, got " + grain);
        }
        int chunks = chunkCount(n, grain);
        if (pool == null || chunks <= 1) {
            for (int c = 0; c < chunks; c++) {
                body.run(c, c * grain, Math.min(n, (c + 1) * grain));
            }
            return;
        }
        pool.invoke(new Chunks(body, n, grain, 0, chunks));
    }

    /** Σ over chunks of {@code body}, combined in chunk order (deterministic). */
    double sum(long n, long grain, ChunkSum body) {
        double[] partials = new double[chunkCount(n, grain)];
        forChunks(n, grain, (c, from, to) -> partials[c] = body.sum(from, to));
        double total = 0;
        for (double p : partials) {
            total += p;
        }
        return total;
    }

    void checkOpen() {
        if (closed) {
            throw new IllegalStateException("the CPU backend was closed");
        }
    }

    @Override
    public void close() {
        closed = true;
        if (pool != null) {
            pool.shutdown();
        }
    }

    /** Splits the chunk range in halves until one chunk is left, then runs it. */
    private static final class Chunks extends RecursiveAction {
        private final ChunkBody body;
        private final long n;
        private final long grain;
        private final int lo;
        private final int hi;

        Chunks(ChunkBody body, long n, long grain, int lo, int hi) {
            this.body = body;
            this.n = n;
            this.grain = grain;
            this.lo = lo;
            this.hi = hi;
        }

        @Override
        protected void compute() {
            if (hi - lo == 1) {
                body.run(lo, lo * grain, Math.min(n, (lo + 1) * grain));
                return;
            }
            int mid = (lo + hi) >>> 1;
            invokeAll(new Chunks(body, n, grain, lo, mid), new Chunks(body, n, grain, mid, hi));
        }
    }
}
