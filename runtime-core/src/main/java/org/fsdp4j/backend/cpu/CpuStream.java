// A CPU stream: work runs in issue order and the issuing call returns at once, as on a GPU,
// so the engine's ordering (events, stream waits, stream-ordered frees) is exercised in CI.
//
// A stream is either a worker (one thread that runs its queue) or inline (the issuing thread
// runs the work on the spot: already in order, and no hand-off per op; the compute stream is
// inline unless the debug mode is on). Work that fails on a worker fails the stream, as a CUDA
// error is sticky: later work is skipped, its events fail, and the host sees the failure at its
// next synchronisation. Inline work throws to the caller directly.
//
// Under the debug mode every stream is a worker and waits a random moment before each piece of
// work: usually nothing or up to a tenth of a millisecond, now and then up to a few milliseconds
// (a slow link, a busy device), so that two streams not ordered by an event run in either
// order, and a missing wait shows up as a wrong result.
package org.fsdp4j.backend.cpu;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.fsdp4j.backend.Backend;

class CpuStream implements Backend.Stream {

    /** The stream whose work the current thread is running (workers only), or null. */
    private static final ThreadLocal<CpuStream> RUNNING = new ThreadLocal<>();
    private static final AtomicInteger IDS = new AtomicInteger();

    private final String name;
    private final ExecutorService worker;      // null when inline
    private final long maxDelayNanos;          // debug: each piece of work first waits up to this long (0: never)
    private final AtomicLong hostSyncs;        // the owning backend's counter
    private volatile Throwable failure;        // the first failure of worker work (sticky)
    private volatile boolean closed;

    CpuStream(String name, boolean inline, long maxDelayNanos, AtomicLong hostSyncs) {
        this.name = name;
        this.maxDelayNanos = maxDelayNanos;
        this.hostSyncs = hostSyncs;
        if (inline) {
            this.worker = null;
        } else {
            String threadName = "fsdp4j-stream-" + name + "-" + IDS.incrementAndGet();
            this.worker = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, threadName);
                t.setDaemon(true);
                return t;
            });
        }
    }

    @Override
    public String name() {
        return name;
    }

    boolean isInline() {
        return worker == null;
    }

    boolean isClosed() {
        return closed;
    }

    /** True when the calling thread is running some CPU stream's work: ops it calls run at once. */
    static boolean inStreamWork() {
        return RUNNING.get() != null;
    }

    /** The stream whose work the calling thread is running, or null. */
    static CpuStream running() {
        return RUNNING.get();
    }

    /**
     * Runs {@code work} in stream order: now when inline or when called from inside stream work
     * (which is already ordered), otherwise queued on the worker.
     */
    void execute(Runnable work) {
        if (inStreamWork()) {
            work.run();          // already in some stream's order: a host function's own ops
            return;
        }
        checkOpen();
        if (worker == null) {
            RUNNING.set(this);   // ops this work calls run at once too
            try {
                work.run();
            } finally {
                RUNNING.remove();
            }
            return;
        }
        submit(() -> {
            if (failure != null) {
                return;   // a failed stream skips its later work, as CUDA does after an error
            }
            try {
                work.run();
            } catch (Throwable t) {
                fail(t);
            }
        });
    }

    @Override
    public void launchHostFunc(Runnable fn) {
        execute(fn);
    }

    @Override
    public CpuEvent record() {
        CpuEvent e = new CpuEvent(name, hostSyncs);
        if (inStreamWork()) {
            e.complete(null);
            return e;
        }
        checkOpen();
        if (worker == null) {
            e.complete(null);
            return e;
        }
        submit(() -> e.complete(failure));
        return e;
    }

    /** Waits for a CPU event, or, in this stream's order, for another backend's (a GPU's) with Event.block. */
    @Override
    public void waitFor(Backend.Event event) {
        checkOpen();
        Runnable wait = event instanceof CpuEvent e ? () -> e.await("stream " + name) : event::block;
        if (worker == null || inStreamWork()) {
            wait.run();   // inline: the issuing thread itself waits (not a host sync on a GPU)
            return;
        }
        submit(() -> {
            if (failure != null) {
                return;
            }
            try {
                wait.run();
            } catch (Throwable t) {
                fail(t);
            }
        });
    }

    @Override
    public void synchronize() {
        hostSyncs.incrementAndGet();
        awaitIdle();
    }

    /** Waits for the work issued so far without counting a host synchronisation; rethrows its failure. */
    void awaitIdle() {
        checkOpen();
        if (worker == null || inStreamWork()) {
            return;
        }
        CpuEvent e = record();
        e.await("stream " + name);
    }

    /** The failure that stopped this stream, or null. */
    Throwable failure() {
        return failure;
    }

    private void fail(Throwable t) {
        synchronized (this) {
            if (failure == null) {
                failure = t;
            }
        }
    }

    private void submit(Runnable task) {
        long maxDelay = maxDelayNanos;
        try {
            worker.execute(() -> {
                RUNNING.set(this);
                try {
                    if (maxDelay > 0) {
                        LockSupport.parkNanos(debugDelayNanos(maxDelay));
                    }
                    task.run();
                } finally {
                    RUNNING.remove();
                }
            });
        } catch (RejectedExecutionException e) {
            throw new IllegalStateException("stream " + name + " is closed", e);
        }
    }

    /** Half the time nothing; else up to a 50th of {@code maxDelay}; one time in twenty, up to all of it. */
    private static long debugDelayNanos(long maxDelay) {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        double u = r.nextDouble();
        if (u < 0.5) {
            return 0;
        }
        return r.nextLong(u < 0.95 ? Math.max(1, maxDelay / 50) : maxDelay);
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("stream " + name + " is closed");
        }
    }

    /**
     * Lets the queued work finish (a failed stream skips it), then stops the worker. Work blocked
     * on an event that never completes is interrupted after {@code patienceMillis}. Idempotent.
     */
    void close(long patienceMillis) {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        if (worker == null) {
            return;
        }
        worker.shutdown();
        try {
            if (!worker.awaitTermination(patienceMillis, TimeUnit.MILLISECONDS)) {
                worker.shutdownNow();
                worker.awaitTermination(patienceMillis, TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            worker.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void close() {
        close(60_000);
    }

    @Override
    public String toString() {
        return "cpu stream " + name + (worker == null ? " (inline)" : "");
    }
}
