// One thread per rank of this process, kept for as long as the ranks live: each run hands every
// rank's thread its body and waits for all of them. Training runs a step after step on the same
// ranks, and a rank's thread holds state that is costly to build again every step: its CPU
// scratch and the attention's head buffers (thread-local by design, so that ranks never share
// them), a GPU's current device. LocalLauncher.run is a run on threads made for it alone.
// Outcomes: the ranks' results in rank order, or one RanksFailedException naming the rank that
// failed first and what every other rank saw. A rank that throws aborts the group (in other
// processes too), so the others stop at their next collective instead of waiting for the timeout.
// A rank still running a few collective timeouts after the run began is reported as stuck and
// its thread is lost: later runs refuse to start (the group is unusable anyway).
package org.fsdp4j.comm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

public final class RankThreads implements AutoCloseable {

    /** What each thread's queue holds: one run's work for that rank, or STOP. */
    private static final Runnable STOP = () -> { };

    private final RankGroup group;
    private final Thread[] threads;
    private final List<LinkedBlockingQueue<Runnable>> inboxes = new ArrayList<>();
    private final AtomicBoolean running = new AtomicBoolean();   // a run is in progress (runs do not nest or overlap)
    private volatile List<Integer> lost = List.of();            // ranks whose thread never came back
    private volatile boolean closed;

    /** Starts the threads "fsdp4j-rank-r" of ranks group.firstRank() .. + group.size() − 1 (daemons, idle until run). */
    public RankThreads(RankGroup group) {
        this.group = group;
        int n = group.size();
        this.threads = new Thread[n];
        for (int r = 0; r < n; r++) {
            LinkedBlockingQueue<Runnable> inbox = new LinkedBlockingQueue<>();
            inboxes.add(inbox);
            threads[r] = new Thread(() -> serve(inbox), "fsdp4j-rank-" + (group.firstRank() + r));
            threads[r].setDaemon(true);
            threads[r].start();
        }
    }

    private static void serve(LinkedBlockingQueue<Runnable> inbox) {
        while (true) {
            Runnable work;
            try {
                work = inbox.take();
            } catch (InterruptedException e) {
                return;
            }
            if (work == STOP) {
                return;
            }
            work.run();               // never throws: the run's wrapper catches everything
        }
    }

    /**
     * Runs {@code body} for every rank of this process on its thread and waits for all of them (at
     * most a few collective timeouts after the start). The results are in rank order.
     */
    public <T> List<T> run(LocalLauncher.RankBody<T> body) {
        if (!running.compareAndSet(false, true)) {
            throw new IllegalStateException("a run on the rank threads is already in progress (runs do not nest or overlap)");
        }
        try {
            return runAlone(body);
        } finally {
            running.set(false);
        }
    }

    private <T> List<T> runAlone(LocalLauncher.RankBody<T> body) {
        if (closed) {
            throw new IllegalStateException("the rank threads were closed");
        }
        if (!lost.isEmpty()) {
            throw new IllegalStateException("ranks " + lost + " of this process hung in an earlier run; their threads"
                    + " are lost and the group cannot run again");
        }
        int n = group.size();
        int base = group.firstRank();
        Object[] results = new Object[n];
        Throwable[] failures = new Throwable[n];
        AtomicInteger firstFailed = new AtomicInteger(-1);
        CountDownLatch finished = new CountDownLatch(n);
        boolean[] done = new boolean[n];
        for (int r = 0; r < n; r++) {
            int local = r;
            inboxes.get(r).add(() -> {
                try {
                    results[local] = body.run(base + local);
                } catch (Throwable t) {
                    failures[local] = t;
                    firstFailed.compareAndSet(-1, local);
                    group.abort(base + local, t);          // idempotent: the first cause wins
                } finally {
                    synchronized (done) {
                        done[local] = true;
                    }
                    finished.countDown();
                }
            });
        }
        long deadlineMillis = 4 * group.timeout().toMillis();
        try {
            finished.await(deadlineMillis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the ranks", e);
        }
        List<Integer> stuck = new ArrayList<>();
        synchronized (done) {
            for (int r = 0; r < n; r++) {
                if (!done[r]) {
                    stuck.add(base + r);
                }
            }
        }
        int first = firstFailed.get();
        if (first < 0 && stuck.isEmpty()) {
            List<T> out = new ArrayList<>(n);
            for (Object o : results) {
                @SuppressWarnings("unchecked")
                T t = (T) o;
                out.add(t);
            }
            return out;
        }
        if (!stuck.isEmpty()) {
            lost = List.copyOf(stuck);
        }
        throw failed(base, first, failures, stuck, deadlineMillis);
    }

    private static LocalLauncher.RanksFailedException failed(int base, int first, Throwable[] failures,
                                                             List<Integer> stuck, long deadlineMillis) {
        StringBuilder msg = new StringBuilder();
        if (first >= 0) {
            msg.append("rank ").append(base + first).append(" failed: ").append(describe(failures[first]));
        }
        for (int r = 0; r < failures.length; r++) {
            if (r != first && failures[r] != null) {
                msg.append("\n  rank ").append(base + r).append(": ").append(describe(failures[r]));
            }
        }
        if (!stuck.isEmpty()) {
            msg.append("\n  ranks still running after ").append(deadlineMillis).append(" ms: ").append(stuck);
        }
        return new LocalLauncher.RanksFailedException(msg.toString(), first < 0 ? -1 : base + first,
                first < 0 ? null : failures[first], Arrays.copyOf(failures, failures.length));
    }

    private static String describe(Throwable t) {
        return t instanceof CommException ? t.getMessage() : t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    /** Lets each idle thread end (a lost one ends if its work ever returns). Idempotent. */
    @Override
    public void close() {
        synchronized (inboxes) {
            if (closed) {
                return;
            }
            closed = true;
        }
        inboxes.forEach(q -> q.add(STOP));
    }
}
