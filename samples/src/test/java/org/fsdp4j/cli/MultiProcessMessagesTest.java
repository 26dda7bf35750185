// What a run over several processes tells its user when it cannot go on, as users start it (child
// JVMs): processes that do not come are named while the others wait (a first notice 10 s into the
// wait) and when they give up (exit 10), also by a process waiting for process 0's store; process 0
// failing at start (its --out is a file) ends the other process at once, not after the launcher's
// 30 s grace; and a failure every process finds the same way (a batch that does not split over
// --world-size) is one error line under `fsdp4j launch`.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MultiProcessMessagesTest {

    private static final List<String> RUN = run(8);

    /** A small run of 2 steps, {@code batch} sequences a step (a multiple of the ranks). */
    private static List<String> run(int batch) {
        return List.of("train", "--device", "cpu", "--preset", "tiny", "--batch-size", "" + batch, "--seq-len", "32",
                "--cpu-threads", "1", "--steps", "2");
    }

    @TempDir
    Path dir;

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private ChildJvm byHand(int rank, int count, int port, List<String> args) throws IOException {
        return ChildJvm.start(dir.resolve("err-" + port + "-" + rank), Map.of("RANK", "" + rank, "WORLD_SIZE", "" + count,
                "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port), args);
    }

    private static List<String> args(List<String> base, String... more) {
        List<String> a = new ArrayList<>(base);
        a.addAll(List.of(more));
        return a;
    }

    private static long errorLines(String err) {
        return err.lines().filter(l -> l.startsWith("error: ")).count();
    }

    @Test
    void theProcessesThatDoNotComeAreNamedWhileTheOthersWaitAndWhenTheyGiveUp() throws Exception {
        int port = freePort();
        int storeless = freePort();
        List<String> run = args(run(10), "--collective-timeout", "11");
        ChildJvm zero = byHand(0, 5, port, run);             // of 5, only 0 and 2 come
        ChildJvm two = byHand(2, 5, port, run);
        ChildJvm alone = byHand(1, 2, storeless, run);       // process 0, which serves the store, never comes
        for (ChildJvm c : List.of(zero, two)) {
            assertEquals(ExitCode.RENDEZVOUS_FAILED.code(), c.exit(40), c.stderr());
            String err = c.stderr();
            assertTrue(err.contains("waiting for processes 1, 3-4 (of 5) to join at 127.0.0.1:" + port + ": 10 s of 11 s;"),
                    err);
            String gaveUp = "error: processes 1, 3-4 (of 5) did not join the run at 127.0.0.1:" + port + " within 11 s";
            // process 2 may still wait when process 0 gives up and its store goes: then it says so, naming them too
            String storeGone = "error: lost the rendezvous store at 127.0.0.1:" + port + " (the other end closed the"
                    + " connection): process 0, which serves it, has ended, while the processes waited for processes 1,"
                    + " 3-4 (of 5) to join";
            assertTrue(err.contains(gaveUp) || c == two && err.contains(storeGone), err);
            assertEquals(1, errorLines(err), err);
        }
        assertEquals(ExitCode.RENDEZVOUS_FAILED.code(), alone.exit(40), alone.stderr());
        String err = alone.stderr();
        assertTrue(err.contains("waiting for process 0 (of 2), which serves the rendezvous store, at 127.0.0.1:" + storeless
                + ": 10 s of 11 s;"), err);
        assertTrue(err.contains("error: cannot reach the rendezvous store at 127.0.0.1:" + storeless + " within 11 s"), err);
        assertEquals(1, errorLines(err), err);
    }

    @Test
    void processZeroFailingAtStartEndsTheOtherProcessAtOnce() throws Exception {
        Path notADirectory = Files.writeString(dir.resolve("a-file"), "x");
        ChildJvm launcher = ChildJvm.start(dir.resolve("launch.err"), Map.of(), args(List.of("launch", "--standalone",
                "--nproc-per-node", "2", "--"), args(RUN, "--collective-timeout", "60", "--out", notADirectory.toString())
                .toArray(String[]::new)));
        // timed from process 0's failure, not from the start: starting the JVMs takes seconds on a loaded machine
        String failed = "error: output path " + notADirectory + " exists and is not a directory";
        long waitUntil = System.nanoTime() + 60_000_000_000L;
        while (!launcher.stderr().contains(failed) && launcher.process().isAlive() && System.nanoTime() < waitUntil) {
            Thread.sleep(50);
        }
        long start = System.nanoTime();
        int code = launcher.exit(45);
        double seconds = (System.nanoTime() - start) / 1e9;
        String err = launcher.stderr();
        assertEquals(ExitCode.BAD_INPUT.code(), code, err);
        assertTrue(seconds < 10, "took " + seconds + " s after process 0 failed: the other process waited for process 0's"
                + " store: " + err);
        assertTrue(err.contains(failed), err);
        // the other process names process 0: its reason if it read it in the store in time, else the store's end
        assertTrue(err.matches("(?s).*error: rank 1 failed: [^\n]*process 0 \\(.*"), err);
        assertTrue(!err.contains("launch: stopping the processes still running"), err);
    }

    @Test
    void aFailureEveryProcessFindsAlikeIsOneLineUnderTheLauncher() throws Exception {
        ChildJvm launcher = ChildJvm.start(dir.resolve("split.err"), Map.of(), args(List.of("launch", "--standalone",
                "--nproc-per-node", "2", "--"), args(RUN, "--world-size", "3").toArray(String[]::new)));
        assertEquals(ExitCode.BAD_INPUT.code(), launcher.exit(40), launcher.stderr());
        String err = launcher.stderr();
        assertTrue(err.contains("error: batch size 8 does not split over 3 ranks"), err);
        assertEquals(1, errorLines(err), "once, not once per process: " + err);
        assertTrue(err.contains("launch: process ") && err.contains(" exited with 1"), err);
        // by hand, each process still says it in its own log
        int port = freePort();
        for (ChildJvm c : List.of(byHand(0, 2, port, args(RUN, "--world-size", "3")),
                byHand(1, 2, port, args(RUN, "--world-size", "3")))) {
            assertEquals(ExitCode.BAD_INPUT.code(), c.exit(40), c.stderr());
            assertEquals(1, errorLines(c.stderr()), c.stderr());
        }
    }
}
