// The fault matrix of a run over several processes, as a table of tests: a CPU run of 2 processes
// × 2 ranks (`fsdp4j launch`, child JVMs), resumed from a checkpoint of step 3 and saving every 3
// steps, meets one fault each: kill -9 of process 0 (which serves the rendezvous store, so this is
// also "the store's process dies first") before it serves the store, and of process 0 and of
// process 1 at start (after they met), mid-step and mid-save;
// SIGSTOP of either beyond the collective timeout; a reset of a peer connection; a full /dev/shm;
// a full --save-dir disk. Each case checks that the job ends within the collective timeout + 10 s
// of the fault with the exit code docs/training.md gives, one `error:` line at most per process,
// the first naming what failed, no process left running, and that the last complete checkpoint
// still resumes. The full-disk cases mount a small tmpfs in a mount namespace of their own
// (`unshare -rm`), and are skipped, saying so, where that is not allowed. The table (case, exit
// code, seconds, line) is printed and written to target/fault-matrix.md. The stand-in NCCL's rows
// are MultiProcessGpuTest's.
package org.fsdp4j.cli;

import static org.fsdp4j.cli.MultiProcessCommandTest.args;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.fsdp4j.dist.FaultPoint;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class FaultMatrixTest {

    /** The collective timeout of the cases where a process dies (its death is seen at once, not timed out). */
    private static final int TIMEOUT_S = 30;
    /** The collective timeout of the cases where a process stops answering: the watchdog's. */
    private static final int STOP_TIMEOUT_S = 4;
    private static final List<String> RUN = List.of("train", "--device", "cpu", "--preset", "tiny", "--batch-size", "8",
            "--seq-len", "32", "--cpu-threads", "1", "--world-size", "4");
    private static final String HOST = "host [^)]+";

    @TempDir
    static Path dir;
    /** A --save-dir holding the checkpoint of step 3 that every case resumes from. */
    private static Path base;
    private static final List<String> TABLE = Collections.synchronizedList(new ArrayList<>());

    @BeforeAll
    static void checkpointOfStepThree() {
        base = dir.resolve("base");
        CliRunner.Result r = CliRunner.run(args(RUN, "--steps", "3", "--save-every", "3", "--save-dir", base.toString())
                .toArray(String[]::new));
        assertEquals(0, r.exitCode(), r.err());
    }

    @AfterAll
    static void printTheTable() throws IOException {
        List<String> lines = new ArrayList<>(List.of("| case | exit code | seconds to exit | line |", "| --- | --- | --- | --- |"));
        lines.addAll(TABLE);
        String table = String.join("\n", lines) + "\n";
        System.out.println("fault matrix (CPU, 2 processes × 2 ranks):\n" + table);
        Path target = Path.of("target");
        if (Files.isDirectory(target)) {
            Files.writeString(target.resolve("fault-matrix.md"), table, StandardCharsets.UTF_8);
        }
    }

    // ---- kill -9: the store's process (0) and the other, at start, mid-step, mid-save ----

    @Test
    @Order(0)
    void killMinusNineOfProcessZeroBeforeItServesTheStore() throws Exception {
        Path saves = copyOfBase("before0");
        ChildJvm job = ChildJvm.start(dir.resolve("before0.err"), Map.of(),
                List.of("-D" + FaultPoint.PROPERTY + "=" + FaultPoint.BEFORE_MEETING + "@0"),
                launched(resumed(saves, TIMEOUT_S)));
        long pid = job.pausedPid(FaultPoint.BEFORE_MEETING);
        List<ProcessHandle> all = job.process().descendants().toList();
        long start = System.nanoTime();
        new ProcessBuilder("kill", "-9", Long.toString(pid)).start().waitFor();
        int code = job.exit(TIMEOUT_S + 30);
        double seconds = (System.nanoTime() - start) / 1e9;
        String err = job.stderr();
        assertEquals(ExitCode.RENDEZVOUS_FAILED.code(), code, "the processes could not meet: " + err);
        String line = checkLines(err, "the processes of the run cannot meet: process 0 \\(pid \\d+\\) exited with 137"
                + " \\(128 \\+ signal 9\\) before they did", 1);
        assertNothingLeft(all);
        assertResumesFromTheLatest(saves);
        row("kill -9 of process 0 before it serves the store", code, seconds, line);
        assertTrue(seconds < 10, "the launcher tells the others at once, not after its --grace: took " + seconds + " s");
    }

    @Test
    @Order(1)
    void killMinusNineOfProcessZeroAtStart() throws Exception {
        killAtStart(0, "the rendezvous store is gone: process 0 \\(ranks 0-1, " + HOST + "\\), which serves it, ended");
    }

    @Test
    @Order(2)
    void killMinusNineOfProcessOneAtStart() throws Exception {
        killAtStart(1, "process 1 \\(ranks 2-3, " + HOST + "\\) ended without a word");
    }

    @Test
    @Order(3)
    void killMinusNineOfProcessZeroMidStep() throws Exception {
        killMidStep(0, "lost the connection to rank [01] \\(process 0, " + HOST + "\\)");
    }

    @Test
    @Order(4)
    void killMinusNineOfProcessOneMidStep() throws Exception {
        Path out = killMidStep(1, "lost the connection to rank [23] \\(process 1, " + HOST + "\\)");
        // process 0 wrote the summary of the steps before, of its own ranks: the others could not send theirs
        var summary = new com.fasterxml.jackson.databind.ObjectMapper().readTree(out.resolve("summary.json").toFile());
        assertEquals("[0,1]", summary.get("ranks_in_per_rank_arrays").toString(), summary.toString());
        assertEquals(4, summary.get("world_size").asInt());
    }

    @Test
    @Order(5)
    void killMinusNineOfProcessZeroMidSave() throws Exception {
        killMidSave(0, "the rendezvous store is gone: process 0 \\(ranks 0-1, " + HOST + "\\), which serves it, ended,"
                + " during the save of step 6 \\(not committed: --resume latest takes the last complete checkpoint\\)");
    }

    @Test
    @Order(6)
    void killMinusNineOfProcessOneMidSave() throws Exception {
        killMidSave(1, "process 1 \\(ranks 2-3, " + HOST + "\\) ended without a word .*, during the save of step 6"
                + " \\(not committed: --resume latest takes the last complete checkpoint\\)");
    }

    // ---- SIGSTOP beyond the collective timeout ----

    @Test
    @Order(7)
    void sigstopOfProcessZero() throws Exception {
        stop(0, "rank [01] \\(process 0, " + HOST + "\\) did not arrive within " + STOP_TIMEOUT_S + " s");
    }

    @Test
    @Order(8)
    void sigstopOfProcessOne() throws Exception {
        stop(1, "rank [23] \\(process 1, " + HOST + "\\) did not arrive within " + STOP_TIMEOUT_S + " s");
    }

    // ---- the network, the host's memory, the disk ----

    @Test
    @Order(9)
    void aPeerConnectionIsReset() throws Exception {
        // processes started by hand, so that only process 1 resets (the launcher gives all its options)
        Path saves = copyOfBase("reset");
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        List<ChildJvm> processes = new ArrayList<>();
        for (int p = 0; p < 2; p++) {
            processes.add(ChildJvm.start(dir.resolve("reset-" + p + ".err"), Map.of("RANK", "" + p, "WORLD_SIZE", "2",
                    "LOCAL_RANK", "" + p, "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port),
                    p == 1 ? List.of("-Dfsdp4j.test.resetPeerConnectionAt=60") : List.of(),
                    resumed(saves, TIMEOUT_S)));
        }
        long fault = awaitInStderr(processes.get(1), "fsdp4j-test: resetting a peer connection");
        int[] codes = new int[2];
        for (int p = 0; p < 2; p++) {
            codes[p] = processes.get(p).exit(TIMEOUT_S + 10);
        }
        double seconds = (System.nanoTime() - fault) / 1e9;
        String err = processes.get(0).stderr() + processes.get(1).stderr();
        for (int p = 0; p < 2; p++) {
            assertEquals(ExitCode.RANK_FAILED.code(), codes[p], err);
        }
        String line = checkLines(err, "lost the connection to rank \\d \\(process [01], " + HOST + "\\)", 2);
        assertResumesFromTheLatest(saves);
        row("a peer connection reset (RST)", codes[0], seconds, line);
        assertTrue(seconds < TIMEOUT_S + 10, "took " + seconds + " s");
    }

    @Test
    @Order(10)
    void devShmIsFull() throws Exception {
        assumeSmallMountsAllowed();
        Path saves = copyOfBase("shm");
        List<String> prefix = List.of("unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /dev/shm && exec \"$@\"",
                "sh");
        long start = System.nanoTime();
        ChildJvm job = ChildJvm.start(dir.resolve("shm.err"), Map.of(), prefix, List.of(),
                launched(resumed(saves, TIMEOUT_S, 5)));
        int code = job.exit(120);
        double seconds = (System.nanoTime() - start) / 1e9;
        String err = job.stderr();
        assertEquals(0, code, "the run goes on over TCP: " + err);
        List<String> notes = err.lines().filter(l -> l.startsWith("fsdp4j: /dev/shm has no room")).toList();
        assertEquals(1, notes.size(), "one line, from the process whose ranks offer the rings: " + err);
        assertTrue(notes.get(0).contains("talk over TCP instead") && notes.get(0).contains("--shm-size"), notes.get(0));
        assertTrue(err.lines().noneMatch(l -> l.startsWith("error: ")), err);
        row("/dev/shm full (64 KiB tmpfs)", code, seconds, notes.get(0) + " (the run completes)");
    }

    @Test
    @Order(11)
    void theSaveDirectorysDiskIsFull() throws Exception {
        assumeSmallMountsAllowed();
        // an 8 MiB tmpfs as --save-dir: step 3's checkpoint (5.3 MiB) fits, step 6's does not
        Path saves = dir.resolve("full-saves");
        Path after = dir.resolve("full-after");
        Files.createDirectories(saves);
        Files.createDirectories(after);
        String script = "mount -t tmpfs -o size=8m tmpfs \"$SAVES\" && cp -a \"$BASE\"/. \"$SAVES\"/ || exit 99; \"$@\";"
                + " rc=$?; ls -A \"$SAVES\" > \"$AFTER/listing\"; df -k \"$SAVES\" | tail -1 > \"$AFTER/df\";"
                + " cp -a \"$SAVES\"/. \"$AFTER\"/; exit $rc";
        ChildJvm job = ChildJvm.start(dir.resolve("full.err"), Map.of("SAVES", saves.toString(), "BASE", base.toString(),
                "AFTER", after.toString()), List.of("unshare", "-rm", "sh", "-c", script, "sh"), List.of(),
                launched(resumed(saves, TIMEOUT_S)));
        long fault = awaitInStderr(job, "error: ");
        int code = job.exit(TIMEOUT_S + 10);
        double seconds = (System.nanoTime() - fault) / 1e9;
        String err = job.stderr();
        assertEquals(ExitCode.IO_ERROR.code(), code, err);
        String line = checkLines(err, "cannot write " + Pattern.quote(saves.toString())
                + "/\\.step-00000006\\.partial-\\d+/rank-\\d+\\.bin: No space left on device", 2);
        String listing = Files.readString(after.resolve("listing"));
        assertTrue(!listing.contains(".partial-"), "the failed save's partial directory is removed: " + listing);
        long usedKiB = Long.parseLong(Files.readString(after.resolve("df")).trim().split("\\s+")[2]);
        assertTrue(usedKiB < 6 * 1024, "the disk holds step 3's checkpoint alone again: " + usedKiB + " KiB used");
        Files.deleteIfExists(after.resolve("listing"));
        Files.deleteIfExists(after.resolve("df"));
        assertResumesFromTheLatest(after);
        row("--save-dir disk full (8 MiB tmpfs)", code, seconds, line);
        assertTrue(seconds < TIMEOUT_S + 10, "took " + seconds + " s");
    }

    // ---- the cases' shared steps ----

    private void killAtStart(int victim, String expected) throws Exception {
        Path saves = copyOfBase("start" + victim);
        ChildJvm job = ChildJvm.start(dir.resolve("start" + victim + ".err"), Map.of(),
                List.of("-D" + FaultPoint.PROPERTY + "=" + FaultPoint.BEFORE_RANKS_CONNECT + "@" + victim),
                launched(resumed(saves, TIMEOUT_S)));
        long pid = job.pausedPid(FaultPoint.BEFORE_RANKS_CONNECT);
        List<ProcessHandle> all = job.process().descendants().toList();
        endsAfterKill(job, pid, all, "kill -9 of process " + victim + " at start" + (victim == 0 ? " (the store's)" : ""),
                expected, saves);
    }

    private Path killMidStep(int victim, String expected) throws Exception {
        Path saves = copyOfBase("step" + victim);
        Path out = dir.resolve("step" + victim + "-out");
        ChildJvm job = ChildJvm.start(dir.resolve("step" + victim + ".err"), Map.of(),
                launched(args(resumed(saves, TIMEOUT_S), "--out", out.toString())));
        job.await("step 5/");
        List<ProcessHandle> all = job.process().descendants().toList();
        endsAfterKill(job, pidOf(job, victim), all, "kill -9 of process " + victim + " mid-step"
                + (victim == 0 ? " (the store's)" : ""), expected, saves);
        assertTrue(job.stderr().contains("exited with 137"), job.stderr());
        return out;
    }

    private void killMidSave(int victim, String expected) throws Exception {
        Path saves = copyOfBase("save" + victim);
        // every process's writer sleeps 1 s per MiB (a rank file of the tiny preset is 1.3 MiB): a save takes ~2 s
        ChildJvm job = ChildJvm.start(dir.resolve("save" + victim + ".err"), Map.of(),
                List.of("-Dfsdp4j.checkpoint.chunkDelayMs=1000"), launched(resumed(saves, TIMEOUT_S)));
        String victimsFile = victim == 0 ? "rank-00000.bin" : "rank-00002.bin";
        Path partial = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (partial == null && System.nanoTime() < deadline && job.process().isAlive()) {
            try (var list = Files.list(saves)) {
                partial = list.filter(p -> p.getFileName().toString().startsWith(".step-00000006.partial-"))
                        .filter(p -> Files.exists(p.resolve(victimsFile))).findFirst().orElse(null);
            }
            Thread.sleep(20);
        }
        assertTrue(partial != null, "the save of step 6 started: " + job.stderr());
        List<ProcessHandle> all = job.process().descendants().toList();
        String resumed = endsAfterKill(job, pidOf(job, victim), all, "kill -9 of process " + victim + " mid-save"
                + (victim == 0 ? " (the store's)" : ""), expected, saves);
        assertTrue(!Files.exists(saves.resolve("step-00000006")), "step 6 never looks complete");
        assertTrue(resumed.contains("resumed from " + saves.resolve("step-00000003")), resumed);
        if (victim == 0) {      // nobody was left to remove the partial save: the resume skips it, naming it
            assertTrue(resumed.contains("checkpoint: ignoring " + partial + ": a save that did not finish"), resumed);
        } else {                // process 0 lived, and removed the save that could not commit
            assertTrue(!Files.exists(partial), "the failed save's directory is removed: " + partial);
        }
    }

    private void stop(int victim, String expected) throws Exception {
        Path saves = copyOfBase("stop" + victim);
        List<String> launch = launched(resumed(saves, STOP_TIMEOUT_S));
        launch.addAll(launch.indexOf("--"), List.of("--grace", "1"));
        ChildJvm job = ChildJvm.start(dir.resolve("stop" + victim + ".err"), Map.of(), launch);
        job.await("step 5/");
        List<ProcessHandle> all = job.process().descendants().toList();
        long pid = pidOf(job, victim);
        long start = System.nanoTime();
        new ProcessBuilder("kill", "-STOP", Long.toString(pid)).start().waitFor();
        int code = job.exit(STOP_TIMEOUT_S + 30);
        double seconds = (System.nanoTime() - start) / 1e9;
        String err = job.stderr();
        assertEquals(ExitCode.RANK_FAILED.code(), code, err);
        String line = checkLines(err, expected, 2);
        assertTrue(err.matches("(?s).*(allGather|reduceScatter|allReduce) #\\d+ on 'world[^']*' at rank \\d \\([^)]+\\).*"), err);
        assertNothingLeft(all);
        assertResumesFromTheLatest(saves);
        row("SIGSTOP of process " + victim + (victim == 0 ? " (the store's)" : "") + ", --collective-timeout "
                + STOP_TIMEOUT_S, code, seconds, line);
        assertTrue(seconds < STOP_TIMEOUT_S + 10, "took " + seconds + " s: the watchdog's " + STOP_TIMEOUT_S
                + " s, the abort, --grace 1 s");
    }

    /** Kills {@code pid}, checks how the job ends; returns what the resume from the latest checkpoint printed. */
    private String endsAfterKill(ChildJvm job, long pid, List<ProcessHandle> all, String name, String expected, Path saves)
            throws Exception {
        long start = System.nanoTime();
        new ProcessBuilder("kill", "-9", Long.toString(pid)).start().waitFor();
        int code = job.exit(TIMEOUT_S + 30);
        double seconds = (System.nanoTime() - start) / 1e9;
        String err = job.stderr();
        assertEquals(ExitCode.RANK_FAILED.code(), code, "the job ends as a failed rank, not as the victim's signal: " + err);
        String line = checkLines(err, expected, 1);      // the survivor's: the killed process says nothing
        assertNothingLeft(all);
        String resumed = assertResumesFromTheLatest(saves);
        row(name, code, seconds, line);
        assertTrue(seconds < TIMEOUT_S + 10, "took " + seconds + " s");
        return resumed;
    }

    /**
     * The `error:` lines of {@code err}: at most {@code most} (one per process that lived to say
     * it), the first matching {@code expected}; returns it.
     */
    private static String checkLines(String err, String expected, int most) {
        List<String> errors = err.lines().filter(l -> l.startsWith("error: ")).toList();
        assertTrue(!errors.isEmpty() && errors.size() <= most, "between 1 and " + most + " error lines: " + err);
        assertTrue(errors.stream().anyMatch(l -> Pattern.compile(expected).matcher(l).find()),
                "a line naming what failed (" + expected + "): " + err);
        assertTrue(err.lines().noneMatch(l -> l.startsWith("\tat ")), "no stack trace: " + err);
        return errors.stream().filter(l -> Pattern.compile(expected).matcher(l).find()).findFirst().orElseThrow();
    }

    private static void assertNothingLeft(List<ProcessHandle> all) throws Exception {
        for (ProcessHandle p : all) {
            p.onExit().get(10, TimeUnit.SECONDS);
            assertTrue(!p.isAlive(), "process " + p.pid() + " is left running");
        }
    }

    /** The last complete checkpoint resumes (one more step, in this JVM); returns what the resume printed. */
    private static String assertResumesFromTheLatest(Path saves) throws IOException {
        int latest;
        try (var list = Files.list(saves)) {
            latest = list.map(p -> p.getFileName().toString()).filter(n -> n.matches("step-\\d{8}"))
                    .mapToInt(n -> Integer.parseInt(n.substring(5))).max().orElseThrow();
        }
        CliRunner.Result r = CliRunner.run(args(RUN, "--save-dir", saves.toString(), "--resume", "latest", "--steps",
                "" + (latest + 1)).toArray(String[]::new));
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("resumed from " + saves.resolve(String.format("step-%08d", latest)) + " at step "
                + latest), r.out());
        return r.out();
    }

    private static void row(String name, int code, double seconds, String line) {
        String shown = line.length() > 220 ? line.substring(0, 217) + "..." : line;
        TABLE.add(String.format(java.util.Locale.ROOT, "| %s | %d | %.1f | `%s` |", name, code, seconds,
                shown.replace("|", "\\|").replace(dir.toString(), "DIR")));
    }

    /** The pid of process {@code p} of {@code job}'s run (its RANK, as the launcher set it). */
    static long pidOf(ChildJvm job, int p) throws IOException {
        for (ProcessHandle h : job.process().children().toList()) {
            String env = Files.readString(Path.of("/proc/" + h.pid() + "/environ"), StandardCharsets.ISO_8859_1);
            if (List.of(env.split("\0")).contains("RANK=" + p)) {
                return h.pid();
            }
        }
        throw new AssertionError("no process " + p + " among the launcher's children");
    }

    /** Waits (60 s at most) until {@code job}'s stderr holds {@code text}; returns System.nanoTime() then. */
    private static long awaitInStderr(ChildJvm job, String text) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            if (job.stderr().contains(text)) {
                return System.nanoTime();
            }
            if (!job.process().isAlive()) {
                break;
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no '" + text + "' on stderr: " + job.stderr());
    }

    private static void assumeSmallMountsAllowed() throws Exception {
        Process p = new ProcessBuilder("unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /dev/shm")
                .redirectErrorStream(true).start();
        String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        Assumptions.assumeTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0,
                "cannot mount a small tmpfs in a mount namespace here (unshare -rm: " + said + ")");
    }

    private static Path copyOfBase(String name) throws IOException {
        Path to = dir.resolve(name);
        try (var walk = Files.walk(base)) {
            for (Path p : walk.toList()) {
                Path q = to.resolve(base.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(q);
                } else if (!p.getFileName().toString().equals(OutputDir.SAVE_LOCK_FILE)) {
                    Files.copy(p, q);
                }
            }
        }
        return to;
    }

    /** RUN resumed from {@code saves}' step 3, saving every 3 steps, until stopped. */
    private static List<String> resumed(Path saves, int timeoutSeconds) {
        return resumed(saves, timeoutSeconds, 100_000);
    }

    private static List<String> resumed(Path saves, int timeoutSeconds, int steps) {
        return args(RUN, "--save-every", "3", "--save-dir", saves.toString(), "--resume", "latest", "--steps", "" + steps,
                "--collective-timeout", "" + timeoutSeconds);
    }

    private static List<String> launched(List<String> run) {
        return args(List.of("launch", "--standalone", "--nproc-per-node", "2", "--"), run.toArray(String[]::new));
    }
}
