// When a process waiting for the others at the start of a run says so: a first notice 10 s into
// the wait (a user who started one process of two by hand, or one node of two, learns soon who is
// awaited), then every 30 s until the timeout (600 s by default), one line each on stderr. Each
// notice gives its scheduled time ("40 s of 600 s"), not the measured one, so the processes of one
// node that wait for the same ones print the same line, which `fsdp4j launch` shows once.
package org.fsdp4j.dist;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

final class WaitNotices {

    /** The first words of every notice (the launcher shows a notice its processes print alike once). */
    static final String PREFIX = "fsdp4j: waiting for ";
    static final Duration FIRST = Duration.ofSeconds(10);
    static final Duration EVERY = Duration.ofSeconds(30);

    private final long start = System.nanoTime();
    private final Duration timeout;
    private long nextNanos = FIRST.toNanos();      // since start

    WaitNotices(Duration timeout) {
        this.timeout = timeout;
    }

    /** How long until the next notice is due (at least a millisecond), to cut a wait into slices. */
    Duration untilNext() {
        return Duration.ofNanos(Math.max(1_000_000, nextNanos - (System.nanoTime() - start)));
    }

    /** When a notice is due (and the wait is not over): how far the wait is, "10 s of 600 s". */
    Optional<String> due() {
        long elapsed = System.nanoTime() - start;
        if (elapsed < nextNanos || elapsed >= timeout.toNanos()) {
            return Optional.empty();
        }
        long at = nextNanos;
        while (nextNanos <= elapsed) {
            nextNanos += EVERY.toNanos();
        }
        return Optional.of(StoreClient.seconds(Duration.ofNanos(at).truncatedTo(java.time.temporal.ChronoUnit.SECONDS))
                + " of " + StoreClient.seconds(timeout));
    }

    /** "process 3", "processes 1, 3-5, 9": the processes named, consecutive ones as ranges. */
    static String processes(List<Integer> sorted) {
        StringBuilder b = new StringBuilder(sorted.size() == 1 ? "process " : "processes ");
        for (int i = 0; i < sorted.size(); i++) {
            int j = i;
            while (j + 1 < sorted.size() && sorted.get(j + 1) == sorted.get(j) + 1) {
                j++;
            }
            if (i > 0) {
                b.append(", ");
            }
            b.append(sorted.get(i));
            if (j > i) {
                b.append('-').append(sorted.get(j));
            }
            i = j;
        }
        return b.toString();
    }
}
