// Runs the ranks of a RankGroup that live in this process, one thread each, and turns their
// outcomes into one result: the ranks' return values in rank order, or one exception that names
// the rank that failed first and what every other rank saw. A rank that throws aborts the group
// (in other processes too), so the others stop at their next collective instead of waiting for
// the timeout.
package org.fsdp4j.comm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

public final class LocalLauncher {

    /** The body each rank runs; it creates its own backend and communicator and closes them. */
    @FunctionalInterface
    public interface RankBody<T> {
        T run(int rank) throws Exception;
    }

    /** Thrown when at least one rank failed; the cause is the first failure. */
    public static final class RanksFailedException extends RuntimeException {
        private final int firstFailedRank;
        private final List<Throwable> failures;

        RanksFailedException(String message, int firstFailedRank, Throwable firstFailure, Throwable[] failures) {
            super(message, firstFailure);
            this.firstFailedRank = firstFailedRank;
            this.failures = java.util.Collections.unmodifiableList(java.util.Arrays.asList(failures.clone()));
        }

        /** The rank whose failure came first, or −1 if ranks only hung. */
        public int firstFailedRank() {
            return firstFailedRank;
        }

        /** What each rank of this process threw (null for a rank that finished or is still running), in rank order. */
        public List<Throwable> failures() {
            return failures;
        }
    }

    private LocalLauncher() {
    }

    /**
     * Runs {@code body} for the ranks of this process, group.firstRank() .. + group.size()−1, on
     * threads "fsdp4j-rank-r" and waits for all of them (at most a few collective timeouts after
     * the first failure). The results are in rank order.
     */
    public static <T> List<T> run(RankGroup group, RankBody<T> body) {
        int n = group.size();
        int base = group.firstRank();
        List<T> results = new ArrayList<>();
        Throwable[] failures = new Throwable[n];
        AtomicInteger firstFailed = new AtomicInteger(-1);
        Thread[] threads = new Thread[n];
        for (int r = 0; r < n; r++) {
            results.add(null);
            int local = r;
            threads[r] = new Thread(() -> {
                try {
                    T value = body.run(base + local);
                    synchronized (results) {
                        results.set(local, value);
                    }
                } catch (Throwable t) {
                    failures[local] = t;
                    firstFailed.compareAndSet(-1, local);
                    group.abort(base + local, t);          // idempotent: the first cause wins
                }
            }, "fsdp4j-rank-" + (base + r));
            threads[r].setDaemon(true);
            threads[r].start();
        }
        long deadlineMillis = System.currentTimeMillis() + 4 * group.timeout().toMillis();
        List<Integer> stuck = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            try {
                threads[r].join(Math.max(1, deadlineMillis - System.currentTimeMillis()));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for the ranks", e);
            }
            if (threads[r].isAlive()) {
                stuck.add(base + r);
            }
        }
        int first = firstFailed.get();
        if (first < 0 && stuck.isEmpty()) {
            return results;
        }
        StringBuilder msg = new StringBuilder();
        if (first >= 0) {
            msg.append("rank ").append(base + first).append(" failed: ").append(describe(failures[first]));
        }
        for (int r = 0; r < n; r++) {
            if (r != first && failures[r] != null) {
                msg.append("\n  rank ").append(base + r).append(": ").append(describe(failures[r]));
            }
        }
        if (!stuck.isEmpty()) {
            msg.append("\n  ranks still running after ").append(4 * group.timeout().toMillis()).append(" ms: ").append(stuck);
        }
        throw new RanksFailedException(msg.toString(), first < 0 ? -1 : base + first, first < 0 ? null : failures[first],
                failures);
    }

    private static String describe(Throwable t) {
        return t instanceof CommException ? t.getMessage() : t.getClass().getSimpleName() + ": " + t.getMessage();
    }
}
