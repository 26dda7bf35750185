// Lends a blocked rank thread's core to the other in-process ranks. With one thread per rank (N = 2
// on 2 cores) the ranks drift apart within a step, and the one ahead waits at the next meeting
// point (an all-gather, a reduce-scatter) while its core idles: ~11 ms of a 169 ms rank-step at
// bench-4x256 N = 2. Here a single-threaded chunked loop (a PanelGemm's row
// blocks, an op's chunks) is posted on a process-wide board while its owner runs it, and a thread
// blocked on a CPU event takes chunks of it until its own event completes.
//
// Chunk boundaries are the owner's and do not depend on who runs a chunk, and every chunk computes
// the same bits on any thread (the chunk loops' contract, CpuThreads), so results do not change.
// Helping is limited to the machine's cores: a thread helps only while the owners running posted
// loops and the threads already helping leave a core free, so N = 4 on 2 cores (every core taken
// by a computing rank) rarely helps and never takes a core from a rank that computes.
// -Dfsdp4j.coreShare=false turns it off (for comparing on one build).
package org.fsdp4j.backend.cpu;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;

final class CoreShare {

    static final boolean ENABLED = Fsdp4jSystemProperties.coreShare();

    private static final int CORES = Runtime.getRuntime().availableProcessors();

    /** Loops whose owners are running them and that still have chunks to hand out. */
    private static final CopyOnWriteArrayList<Loop> BOARD = new CopyOnWriteArrayList<>();
    /** Threads blocked in {@link #helpUntil}: a newly posted loop wakes them. */
    private static final CopyOnWriteArrayList<Thread> IDLE = new CopyOnWriteArrayList<>();
    /** Threads running chunks of a loop they do not own. */
    private static final AtomicInteger HELPING = new AtomicInteger();

    private CoreShare() {
    }

    /** Whether a loop run on one thread should be offered to blocked threads (it has chunks to share). */
    static boolean worthPosting(int chunks) {
        return ENABLED && CORES > 1 && chunks > 1;
    }

    /**
     * Runs {@code chunk} for 0 .. chunks − 1 on this thread and on blocked threads that come to
     * help, each chunk exactly once; returns when all are done and rethrows the first failure.
     */
    static void run(int chunks, IntConsumer chunk) {
        if (!worthPosting(chunks)) {
            for (int c = 0; c < chunks; c++) {
                chunk.accept(c);
            }
            return;
        }
        Loop loop = new Loop(chunk, chunks);
        BOARD.add(loop);
        for (Thread t : IDLE) {
            LockSupport.unpark(t);
        }
        try {
            while (loop.runOne()) {
                // the owner takes chunks until none is left
            }
        } finally {
            BOARD.remove(loop);
        }
        while (loop.done.get() < chunks) {   // a helper finishes its last chunk; it unparks us
            LockSupport.park(loop);
        }
        Throwable t = loop.failure;
        if (t instanceof RuntimeException re) {
            throw re;
        }
        if (t instanceof Error err) {
            throw err;
        }
    }

    /**
     * Returns when {@code until} completes (or the thread is interrupted: the caller's own wait
     * then reports it), running chunks of other threads' posted loops meanwhile.
     */
    static void helpUntil(CompletableFuture<?> until) {
        Thread me = Thread.currentThread();
        IDLE.add(me);
        until.whenComplete((v, e) -> LockSupport.unpark(me));
        try {
            while (!until.isDone() && !me.isInterrupted()) {
                Loop loop = pick(me);
                if (loop == null) {
                    LockSupport.park(until);
                    continue;
                }
                HELPING.incrementAndGet();
                long t0 = OpTimes.ENABLED ? System.nanoTime() : 0;
                int chunks = 0;
                try {
                    while (!until.isDone() && loop.runOne()) {
                        chunks++;   // one chunk at a time: our own event may complete meanwhile
                    }
                } finally {
                    HELPING.decrementAndGet();
                    if (OpTimes.ENABLED) {
                        OpTimes.helped(chunks, System.nanoTime() - t0);
                    }
                }
            }
        } finally {
            IDLE.remove(me);
        }
    }

    /** A posted loop of another thread with chunks left, if a core is free for one more thread. */
    private static Loop pick(Thread me) {
        if (BOARD.size() + HELPING.get() >= CORES) {
            return null;
        }
        for (Loop loop : BOARD) {
            if (loop.owner != me && loop.next.get() < loop.chunks) {
                return loop;
            }
        }
        return null;
    }

    /** One posted loop: chunks handed out from a shared counter to the owner and its helpers. */
    private static final class Loop {
        final IntConsumer chunk;
        final int chunks;
        final Thread owner = Thread.currentThread();
        final AtomicInteger next = new AtomicInteger();   // the next chunk to hand out
        final AtomicInteger done = new AtomicInteger();   // chunks finished (or failed)
        volatile Throwable failure;                         // the first chunk's error

        Loop(IntConsumer chunk, int chunks) {
            this.chunk = chunk;
            this.chunks = chunks;
        }

        /** Runs the next chunk, if one is left; false when none was. */
        boolean runOne() {
            int c = next.getAndIncrement();
            if (c >= chunks) {
                return false;
            }
            try {
                chunk.accept(c);
            } catch (RuntimeException | Error e) {
                if (failure == null) {
                    failure = e;
                }
            }
            if (done.incrementAndGet() == chunks && Thread.currentThread() != owner) {
                LockSupport.unpark(owner);
            }
            return true;
        }
    }
}
