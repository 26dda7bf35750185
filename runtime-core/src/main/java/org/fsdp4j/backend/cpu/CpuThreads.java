// The CPU backend's parallel loops. Work is cut into chunks whose boundaries depend only on
// the problem size and a fixed grain, never on the thread count, and reductions combine the
// per-chunk partials in chunk order: results are bit-identical whatever the scheduling and
// however many threads run (1 thread and 8 threads give the same bits). The calling thread
// takes chunks too, from one shared counter with threads − 1 pool workers: it does not park
// while the pool works (a park and a wake per op cost a tenth of a 2-thread step).
package org.fsdp4j.backend.cpu;

import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

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
    private final ForkJoinPool pool;   // threads − 1 helpers; null when single-threaded
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
            this.pool = new ForkJoinPool(threads - 1, p -> {
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
        if (pool == null && CoreShare.worthPosting(chunks)) {   // a blocked rank thread may take chunks
            CoreShare.run(chunks, c -> body.run(c, c * grain, Math.min(n, (c + 1) * grain)));
            return;
        }
        if (pool == null || chunks <= 1) {
            for (int c = 0; c < chunks; c++) {
                body.run(c, c * grain, Math.min(n, (c + 1) * grain));
            }
            return;
        }
        new SharedChunks(body, n, grain, chunks).run(pool, threads - 1);
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

    /** One loop's chunks, handed out in any order to the caller and the helpers that join in. */
    private static final class SharedChunks implements Runnable {
        private final ChunkBody body;
        private final long n;
        private final long grain;
        private final int chunks;
        private final Thread caller = Thread.currentThread();
        private final AtomicInteger next = new AtomicInteger();   // the next chunk to hand out
        private final AtomicInteger done = new AtomicInteger();   // chunks finished (or failed)
        private volatile Throwable failure;                         // the first chunk's error

        SharedChunks(ChunkBody body, long n, long grain, int chunks) {
            this.body = body;
            this.n = n;
            this.grain = grain;
            this.chunks = chunks;
        }

        /** Runs every chunk with up to {@code helpers} pool workers; returns when all are done. */
        void run(ForkJoinPool pool, int helpers) {
            for (int i = 0; i < Math.min(helpers, chunks - 1); i++) {
                pool.execute(this);
            }
            run();
            while (done.get() < chunks) {   // a helper still finishes its last chunk; it unparks us
                LockSupport.park(this);
            }
            Throwable t = failure;
            if (t instanceof RuntimeException) {
                throw (RuntimeException) t;
            }
            if (t instanceof Error) {
                throw (Error) t;
            }
        }

        /** Takes chunks until none is left (a helper that starts late finds none and returns). */
        @Override
        public void run() {
            for (int c = next.getAndIncrement(); c < chunks; c = next.getAndIncrement()) {
                try {
                    body.run(c, c * grain, Math.min(n, (c + 1) * grain));
                } catch (RuntimeException | Error e) {
                    if (failure == null) {
                        failure = e;
                    }
                }
                if (done.incrementAndGet() == chunks && Thread.currentThread() != caller) {
                    LockSupport.unpark(caller);
                }
            }
        }
    }
}
