// A point in a CPU stream's work: a future that completes when the stream has run everything
// issued before the record, or fails with the stream's failure. Any CPU stream (of any CPU
// backend: ranks and an offload host share events) can wait for it; the host can block on it.
// A thread that issues work and blocks here runs other in-process ranks' posted chunks meanwhile
// (CoreShare); a stream's worker just waits.
package org.fsdp4j.backend.cpu;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import org.fsdp4j.backend.Backend;

final class CpuEvent implements Backend.Event {

    private final String stream;
    private final AtomicLong hostSyncs;    // the recording backend's counter
    private final CompletableFuture<Void> done = new CompletableFuture<>();

    CpuEvent(String stream, AtomicLong hostSyncs) {
        this.stream = stream;
        this.hostSyncs = hostSyncs;
    }

    static CpuEvent of(Backend.Event event, String where) {
        if (!(event instanceof CpuEvent e)) {
            throw new IllegalArgumentException(where + ": " + event + " is not an event of a CPU stream");
        }
        return e;
    }

    /** Completes the event, or fails it with {@code failure} when that is not null. */
    void complete(Throwable failure) {
        if (failure == null) {
            done.complete(null);
        } else {
            done.completeExceptionally(failure);
        }
    }

    @Override
    public void synchronize() {
        hostSyncs.incrementAndGet();
        await("host");
    }

    @Override
    public boolean isDone() {
        return done.isDone();
    }

    @Override
    public void block() {
        await("another backend's stream");
    }

    /**
     * Blocks until the event completes; a failure of the recording stream is rethrown in the
     * waiting thread as it was thrown (a CommException stays one: its message names the rank and
     * the collective, and the caller's error handling keys on its type).
     */
    void await(String waiter) {
        if (OpTimes.ENABLED && !done.isDone()) {
            long t0 = System.nanoTime();
            try {
                awaitDone(waiter);
            } finally {
                OpTimes.waited(System.nanoTime() - t0, stream);
            }
            return;
        }
        awaitDone(waiter);
    }

    private void awaitDone(String waiter) {
        if (!done.isDone() && CoreShare.ENABLED && CpuStream.running() == null) {
            CoreShare.helpUntil(done);   // a thread that issues work lends its core meanwhile (a stream's worker does not)
        }
        try {
            done.get();
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException re) {
                throw re;
            }
            if (c instanceof Error err) {
                throw err;
            }
            throw new IllegalStateException(waiter + " waited for stream " + stream + ", whose work failed: " + c, c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(waiter + ": interrupted while waiting for stream " + stream, e);
        }
    }

    @Override
    public String toString() {
        return "event on " + stream + (done.isDone() ? " (done)" : "");
    }
}
