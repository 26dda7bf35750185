// The thread that ends every NCCL hang of a group, as PyTorch's ProcessGroupNCCL watchdog does.
// NCCL's collectives are queued on CUDA streams and return at once, so nobody waits on them from
// the host until the step's end, and a peer that died or stopped leaves them spinning on the GPU
// forever. Each collective records an event after itself; while any is in flight the watchdog
// looks ten times a second whether the oldest of each communicator has completed, and fails the
// group when one has not within the collective timeout (naming the processes whose heartbeat
// stopped, across processes), when NCCL reports an asynchronous error on a communicator (a
// remote process that exited, a network error), or when the store says a process died or
// aborted. Failing the group aborts its communicators (ncclCommAbort), which releases the
// streams, and leaves the reason in the store for the other processes. If this process is still
// there some seconds later (its host stuck in a CUDA call the abort did not release), the
// process-wide StuckAfterAbort handler (the command line's prints the reason and exits 7) runs; a
// library user gets the failure from the next call instead.
package org.fsdp4j.nccl;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.ProcessDirectory;
import org.fsdp4j.comm.StuckAfterAbort;

final class NcclWatchdog {

    private static final long POLL_MILLIS = 100;
    private static final long SLOW_LOOK_MILLIS = 1000;

    /** A collective issued and not yet seen complete. */
    private record InFlight(String what, long issuedNanos, Backend.Event done) {
    }

    private final NcclGroup group;
    private final ProcessDirectory directory;     // null: one process
    private final Duration timeout;
    private final Map<NcclCommunicator, ArrayDeque<InFlight>> inFlight = new ConcurrentHashMap<>();
    private final Map<NcclCommunicator, String> lastIssued = new ConcurrentHashMap<>();   // named when nothing is in flight
    private Thread thread;                        // runs while a communicator is open, null otherwise
    private volatile boolean stopped;

    NcclWatchdog(NcclGroup group, ProcessDirectory directory, Duration timeout) {
        this.group = group;
        this.directory = directory;
        this.timeout = timeout;
    }

    /** Starts watching {@code c} (and the thread, with the first communicator). */
    synchronized void watch(NcclCommunicator c) {
        inFlight.put(c, new ArrayDeque<>());
        if (thread == null && !stopped) {
            thread = new Thread(this::run, "fsdp4j-nccl-watchdog");
            thread.setDaemon(true);
            thread.start();
        }
    }

    synchronized void unwatch(NcclCommunicator c) {
        inFlight.remove(c);
        lastIssued.remove(c);
    }

    /** {@code what} was issued on {@code c}; {@code done} completes with it. */
    void issued(NcclCommunicator c, String what, Backend.Event done) {
        ArrayDeque<InFlight> q = inFlight.get(c);
        if (q != null) {
            synchronized (q) {
                q.add(new InFlight(what, System.nanoTime(), done));
            }
            lastIssued.put(c, what);
        }
    }

    /** The oldest collective of {@code c} still in flight, or null. */
    String oldest(NcclCommunicator c) {
        ArrayDeque<InFlight> q = inFlight.get(c);
        if (q == null) {
            return null;
        }
        synchronized (q) {
            InFlight f = q.peek();
            return f == null ? null : f.what();
        }
    }

    synchronized void stop() {
        stopped = true;
        if (thread != null) {
            thread.interrupt();
        }
    }

    /** The group was aborted: if the process is still here a while from now, the stuck handler runs. */
    void aborted(CommException why) {
        StuckAfterAbort.arm(why);
    }

    private void run() {
        long nextSlowLook = System.nanoTime();
        try {
            while (!stopped && !group.isAborted()) {
                Thread.sleep(POLL_MILLIS);
                synchronized (this) {
                    if (inFlight.isEmpty()) {       // every communicator closed: the next one starts a thread again
                        thread = null;
                        return;
                    }
                }
                String failure = lookAtCollectives();
                long now = System.nanoTime();
                if (failure == null && now >= nextSlowLook) {
                    nextSlowLook = now + SLOW_LOOK_MILLIS * 1_000_000L;
                    failure = lookAtNcclAndStore();
                }
                if (failure != null) {
                    group.abortWith(new CommException(failure), true);
                }
            }
        } catch (InterruptedException e) {
            // stopped
        } catch (RuntimeException e) {
            group.abortWith(new CommException("the NCCL watchdog failed: " + e, e), true);
        }
    }

    /** Drops the completed collectives; the first that is past the timeout, described, or null. */
    private String lookAtCollectives() {
        long now = System.nanoTime();
        for (Map.Entry<NcclCommunicator, ArrayDeque<InFlight>> e : inFlight.entrySet()) {
            ArrayDeque<InFlight> q = e.getValue();
            InFlight late = null;
            synchronized (q) {
                while (!q.isEmpty() && q.peek().done().isDone()) {
                    q.poll();
                }
                InFlight head = q.peek();
                if (head != null && now - head.issuedNanos() > timeout.toNanos()) {
                    late = head;
                }
            }
            if (late != null) {
                return late.what() + " did not complete within " + NcclGroup.seconds(timeout) + group.stalled();
            }
        }
        return null;
    }

    /** An asynchronous NCCL error on any communicator, or a failure the store tells of; null when all is well. */
    private String lookAtNcclAndStore() {
        for (NcclCommunicator c : inFlight.keySet()) {
            String error = c.asyncError();
            if (error != null) {
                // the collective in flight, else the last one issued (an aborted collective lets its stream go on)
                String inFlightNow = oldest(c);
                String during = inFlightNow != null ? inFlightNow : lastIssued.get(c);
                String ncclSays = (during == null ? c.describe() : during) + ": NCCL reported " + error;
                // a process that died leaves its mark in the store a moment after its sockets close
                String why = directory == null ? null : directory.failureWithin(Duration.ofSeconds(3)).orElse(null);
                return why == null ? ncclSays : why + "; " + ncclSays;
            }
        }
        if (directory != null) {
            String why = directory.failure().orElse(null);
            if (why != null) {
                String during = null;
                for (NcclCommunicator c : inFlight.keySet()) {
                    during = during != null ? during : oldest(c);
                }
                return during == null ? why : why + ", while " + during + " waited for it";
            }
        }
        return null;
    }
}
