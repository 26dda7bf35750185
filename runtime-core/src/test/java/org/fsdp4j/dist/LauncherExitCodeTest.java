// The job's exit code under fsdp4j launch: a process's own failure code wins over a peer's death
// by signal (the survivors of a kill -9 say 7, the victim 137: the job says 7) and over a
// survivor's 7, whichever ended first (a full disk's 6 stands); a death by signal
// alone is a failed rank (7); after a stop the launcher passed on, the processes' own answer
// (130, 143) stands; success is 0.
package org.fsdp4j.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class LauncherExitCodeTest {

    @Test
    void aProcessOwnFailureWinsOverADeathBySignal() {
        assertEquals(0, Launcher.jobExitCode(0, 0, false));
        assertEquals(7, Launcher.jobExitCode(137, 0, false), "the victim died first, the survivor said 7");
        assertEquals(6, Launcher.jobExitCode(7, 6, false), "a survivor said 7 before the process whose disk was full said 6");
        assertEquals(9, Launcher.jobExitCode(9, 9, false), "a bad checkpoint stays a bad checkpoint");
        assertEquals(7, Launcher.jobExitCode(137, 0, false), "only deaths by signal: a rank failed");
        assertEquals(143, Launcher.jobExitCode(143, 0, true), "a SIGTERM passed on: the processes' own answer");
        assertEquals(130, Launcher.jobExitCode(130, 0, true));
    }
}
