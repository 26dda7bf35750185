// A decorator that makes every collective take at least a fixed latency longer, as a slow
// link would: calls still run in issue order (its own stream), so a step that waits on each
// all-gather pays the latency every time, and a step that prefetches hides it behind compute.
// Used to show overlap is real without a network.
package org.fsdp4j.comm;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

public final class LatencyCommunicator extends ForwardingCommunicator {

    private final Duration latency;
    private final ExecutorService link;

    public LatencyCommunicator(Communicator inner, Duration latency) {
        super(inner);
        if (latency.isNegative()) {
            throw new IllegalArgumentException("latency must be >= 0, got " + latency);
        }
        this.latency = latency;
        String threadName = "fsdp4j-latency-" + inner.name() + "-r" + inner.rank();
        this.link = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, threadName);
            t.setDaemon(true);
            return t;
        });
    }

    /** Sleeps the latency on the link's stream, then issues the call and waits for it there. */
    @Override
    protected CommHandle collective(CommOp op, Supplier<CommHandle> call) {
        return delayed(call);
    }

    @Override
    public Communicator split(int color, int key, String name) {
        try {   // through the link, so the split keeps its place among the calls already queued
            return new LatencyCommunicator(link.submit(() -> inner.split(color, key, name)).get(), latency);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof RuntimeException re ? re : new CommException(e.getCause().toString(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CommException("communicator '" + name() + "': interrupted while splitting");
        }
    }

    @Override
    public void abort(Throwable cause) {
        inner.abort(cause);
        link.shutdown();
    }

    @Override
    public void close() {
        link.shutdown();
        try {
            link.awaitTermination(1, TimeUnit.MINUTES);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        inner.close();
    }

    private CommHandle delayed(Supplier<CommHandle> call) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        try {
            link.execute(() -> {
                try {
                    Thread.sleep(latency.toMillis(), latency.toNanosPart() % 1_000_000);
                    call.get().await();
                    done.complete(null);
                } catch (Throwable t) {
                    done.completeExceptionally(t);
                }
            });
        } catch (RejectedExecutionException e) {
            done.completeExceptionally(new CommException("communicator '" + name() + "' at rank " + rank()
                    + ": the latency link has stopped (closed or aborted)"));
        }
        return new CommHandle() {
            @Override
            public void await() {
                try {
                    done.get();
                } catch (ExecutionException e) {
                    Throwable c = e.getCause();
                    throw c instanceof CommException ce ? new CommException(ce.getMessage(), ce)
                            : new CommException("communicator '" + name() + "': " + c, c);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new CommException("communicator '" + name() + "': interrupted while waiting");
                }
            }

            @Override
            public boolean isDone() {
                return done.isDone();
            }
        };
    }
}
