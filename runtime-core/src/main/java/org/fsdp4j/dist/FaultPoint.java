// Named points in a process's life where a test can hold it to kill it there (kill -9 before its
// ranks connect, say): with -Dfsdp4j.test.pauseAt=NAME (every process) or NAME@P (process P of
// the run only) the process prints one line on stderr when it reaches that point and then waits
// until it is killed. Unset (every real run), reaching
// a point costs one property read. The fault tests use it to put a real SIGKILL or SIGSTOP at an
// exact moment instead of guessing one from the time.
package org.fsdp4j.dist;

import org.fsdp4j.backend.Fsdp4jSystemProperties;

public final class FaultPoint {

    /** The property that names where to pause. */
    public static final String PROPERTY = Fsdp4jSystemProperties.TEST_PAUSE_AT;
    /** What the paused process prints on stderr, before the point's name. */
    public static final String PAUSED = "fsdp4j-test: paused at ";

    /** Before this process serves (process 0) or reaches the rendezvous store: the others cannot meet it yet. */
    public static final String BEFORE_MEETING = "before-meeting";
    /** After the rendezvous, before this process's ranks connect to the others (TCP connections, NCCL's init). */
    public static final String BEFORE_RANKS_CONNECT = "before-ranks-connect";

    private FaultPoint() {
    }

    /** Pauses here, for good, if the property names {@code point} (for every process, or for {@code process}). */
    public static void reach(String point, int process) {
        String at = Fsdp4jSystemProperties.testPauseAt();
        if (at == null || !(at.equals(point) || at.equals(point + "@" + process))) {
            return;
        }
        System.err.println(PAUSED + point + " (pid " + ProcessHandle.current().pid() + ")");
        System.err.flush();
        while (true) {
            try {
                Thread.sleep(Long.MAX_VALUE);
            } catch (InterruptedException e) {
                // only a kill ends it
            }
        }
    }
}
