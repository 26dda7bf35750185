// What a process does when one of its groups was aborted and it is still running some seconds
// later: its threads stuck in a call the abort did not release (a CUDA synchronisation behind a
// NCCL kernel that never ends). A library has no business ending the process, so by default
// nothing happens (the failure surfaces at the next call); the command line installs a handler
// that prints the reason as its one error line and exits with the failed-rank code, which is
// what lets `fsdp4j launch`, Slurm or Kubernetes end the job instead of waiting on it forever.
package org.fsdp4j.comm;

import java.time.Duration;
import java.util.function.Consumer;

public final class StuckAfterAbort {

    /** How long an aborted process may take to end by itself before the handler runs. */
    public static final Duration GRACE = Duration.ofSeconds(10);

    private static volatile Consumer<CommException> handler;

    private StuckAfterAbort() {
    }

    /** Sets the process-wide handler (null: none). */
    public static void handler(Consumer<CommException> h) {
        handler = h;
    }

    /** A group of this process was aborted for {@code why}: the handler runs GRACE from now unless the JVM has ended. */
    public static void arm(CommException why) {
        Consumer<CommException> h = handler;
        if (h == null) {
            return;
        }
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(GRACE.toMillis());
                h.accept(why);
            } catch (InterruptedException e) {
                // the JVM is going down anyway
            }
        }, "fsdp4j-stuck-after-abort");
        t.setDaemon(true);
        t.start();
    }
}
