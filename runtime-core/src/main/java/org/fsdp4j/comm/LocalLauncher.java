// Runs the ranks of a RankGroup that live in this process once, one thread each (RankThreads made
// for the one run), and turns their outcomes into one result: the ranks' return values in rank
// order, or one exception that names the rank that failed first and what every other rank saw.
// A rank that throws aborts the group (in other processes too), so the others stop at their next
// collective instead of waiting for the timeout.
package org.fsdp4j.comm;

import java.util.List;

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
     * Runs {@code body} once for the ranks of this process, group.firstRank() .. + group.size()−1,
     * on threads "fsdp4j-rank-r" made for this run (RankThreads: one set of threads for many runs),
     * and waits for all of them (at most a few collective timeouts after the first failure). The
     * results are in rank order.
     */
    public static <T> List<T> run(RankGroup group, RankBody<T> body) {
        try (RankThreads threads = new RankThreads(group)) {
            return threads.run(body);
        }
    }
}
