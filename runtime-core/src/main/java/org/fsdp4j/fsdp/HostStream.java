// A "stream" on the host: one thread that runs submitted work in order, and a future per
// submission that plays the role of the event recorded after it (DESIGN.md "Streams"). The
// engine keeps its all-gathers and its gradient reductions on two of these, so communication
// overlaps the compute on the rank's own thread for real.
package org.fsdp4j.fsdp;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

final class HostStream implements AutoCloseable {

    private final String name;
    private final ExecutorService thread;

    HostStream(String name) {
        this.name = name;
        this.thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "fsdp4j-stream-" + name);
            t.setDaemon(true);
            return t;
        });
    }

    /** Queues {@code work} after everything submitted before it; the future completes with its result or failure. */
    <T> CompletableFuture<T> submit(Callable<T> work) {
        CompletableFuture<T> done = new CompletableFuture<>();
        try {
            thread.execute(() -> {
                try {
                    done.complete(work.call());
                } catch (Throwable t) {
                    done.completeExceptionally(t);
                }
            });
        } catch (RejectedExecutionException e) {
            done.completeExceptionally(new IllegalStateException("stream " + name + " is closed"));
        }
        return done;
    }

    /** Lets queued work finish (it fails fast once the group is aborted), then stops the thread. */
    @Override
    public void close() {
        thread.shutdown();
        try {
            if (!thread.awaitTermination(5, TimeUnit.MINUTES)) {
                throw new IllegalStateException("stream " + name + " did not stop within 5 minutes");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
