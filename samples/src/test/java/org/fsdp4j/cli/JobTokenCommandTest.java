// Only a job's own processes get into it, over real child JVMs as users start them. While a
// launched 2-process CPU job runs, a raw store request, a connection with another token and one
// without a token are closed, process 0 logs 127.0.0.1 once, and the job ends with the losses of
// the same job run without intruders. The token (given, or made by the launcher and read here
// from a child's environment) is in no file the run writes (--out, --save-dir), in no output and
// in no child's command line. A second job with another token pointed at a running job's port
// fails at once, each process with one error line and exit 10. A run that may span hosts without
// a token (the command line, Slurm's variables, launch --nnodes 2) or with an unreadable token file
// stops at start with one line and exit 1.
package org.fsdp4j.cli;

import static org.fsdp4j.testing.Sockets.closedWithoutAnswer;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataOutputStream;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.fsdp4j.comm.Handshake;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.RefusalLog;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class JobTokenCommandTest {

    private static final List<String> RUN = List.of("train", "--device", "cpu", "--preset", "tiny", "--batch-size", "8",
            "--seq-len", "32", "--cpu-threads", "1", "--collective-timeout", "30", "--world-size", "2");

    @TempDir
    Path dir;

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static String newToken() {
        byte[] b = new byte[32];
        new SecureRandom().nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    private ChildJvm launch(String name, Map<String, String> env, int port, String... train) throws IOException {
        List<String> args = new ArrayList<>(List.of("launch", "--standalone", "--nproc-per-node", "2", "--master-port",
                Integer.toString(port), "--"));
        args.addAll(RUN);
        args.addAll(List.of(train));
        return ChildJvm.start(dir.resolve(name + ".err"), env, args);
    }

    /** A connection to 127.0.0.1:port once something listens there (60 s at most). */
    private static Socket connectWhenUp(int port) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                return new Socket("127.0.0.1", port);
            } catch (IOException notYet) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("nothing listens on port " + port);
                }
                Thread.sleep(20);
            }
        }
    }

    /**
     * The token in a child's environment, once it has one (60 s at most): between the launcher's
     * fork and the child's exec, /proc/PID/environ still shows the launcher's own variables.
     */
    private static String tokenOf(ProcessHandle child) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            String t = environmentOf(child).get(JobToken.VARIABLE);
            if (t != null || System.nanoTime() > deadline || !child.isAlive()) {
                return t;
            }
            Thread.sleep(20);
        }
    }

    /** The variables of a running process (/proc/PID/environ), by name. */
    private static Map<String, String> environmentOf(ProcessHandle p) throws IOException {
        Map<String, String> env = new java.util.HashMap<>();
        for (String kv : new String(Files.readAllBytes(Path.of("/proc/" + p.pid() + "/environ")), StandardCharsets.UTF_8)
                .split("\0")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                env.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return env;
    }

    /** The launcher's two processes, once both are started (60 s at most). */
    private static List<ProcessHandle> children(ChildJvm launcher) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            List<ProcessHandle> c = launcher.process().children().toList();
            if (c.size() == 2) {
                return c;
            }
            Thread.sleep(20);
        }
        throw new AssertionError("the launcher did not start two processes");
    }

    /** Neither the token's text nor its bytes as hex-decoded appear in any file under the folders, nor in {@code texts}. */
    private static void assertNowhere(String token, List<Path> folders, List<String> texts) throws IOException {
        byte[] asText = token.getBytes(StandardCharsets.UTF_8);
        byte[] asBytes = HexFormat.of().parseHex(token);
        int files = 0;
        for (Path folder : folders) {
            List<Path> all;
            try (Stream<Path> walk = Files.walk(folder)) {
                all = walk.filter(Files::isRegularFile).toList();
            }
            for (Path f : all) {
                byte[] b = Files.readAllBytes(f);
                assertFalse(contains(b, asText) || contains(b, asBytes), "the token is in " + f);
                files++;
            }
        }
        assertTrue(files >= 4, "the run wrote its reports and checkpoints: " + files + " files");
        for (String t : texts) {
            assertFalse(t.contains(token), "the token is in the output: " + t);
        }
    }

    private static boolean contains(byte[] hay, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= hay.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (hay[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }

    @Test
    void intrudersAreRefusedWhileALaunchedJobRunsAndItsLossesAreUnchanged() throws Exception {
        // the same job without intruders, with the token the launcher makes
        Path refOut = dir.resolve("ref");
        Path refSaves = dir.resolve("ref-saves");
        ChildJvm ref = launch("ref", Map.of(), freePort(), "--steps", "4", "--out", refOut.toString(), "--save-every", "2",
                "--save-dir", refSaves.toString());
        List<ProcessHandle> refChildren = children(ref);
        String made = tokenOf(refChildren.get(0));
        assertTrue(made != null && made.matches("[0-9a-f]{64}"), "the launcher gives its processes a 256-bit token");
        assertEquals(made, tokenOf(refChildren.get(1)), "the same for both");
        for (ProcessHandle c : refChildren) {
            assertFalse(c.info().commandLine().orElse("").contains(made), "not on the command line");
        }
        assertEquals(0, ref.exit(180), ref.stderr());

        String token = newToken();
        int port = freePort();
        Path out = dir.resolve("intruded");
        Path saves = dir.resolve("intruded-saves");
        ChildJvm job = launch("job", Map.of(JobToken.VARIABLE, token), port, "--steps", "4", "--out", out.toString(),
                "--save-every", "2", "--save-dir", saves.toString());
        try (Socket raw = connectWhenUp(port)) {          // a store GET of the run's id, without the handshake
            DataOutputStream o = new DataOutputStream(raw.getOutputStream());
            byte[] key = "run/id".getBytes(StandardCharsets.UTF_8);
            o.writeInt(0x46534451);
            o.writeByte(1);
            o.writeByte(2);
            o.writeShort(0);
            o.writeInt(key.length);
            o.writeInt(0);
            o.writeInt(0);
            o.writeLong(1000);
            o.write(key);
            o.flush();
            assertTrue(closedWithoutAnswer(raw), "a request without the token gets nothing back");
        }
        try (Socket wrong = connectWhenUp(port)) {
            Handshake.Failed f = assertThrows(Handshake.Failed.class, () -> Handshake.open(wrong,
                    JobToken.fromEnvironment(Map.of(JobToken.VARIABLE, newToken())).orElseThrow(), Handshake.Kind.STORE,
                    Duration.ofSeconds(10)));
            assertEquals(Handshake.Reason.REFUSED, f.reason());
        }
        try (Socket none = connectWhenUp(port)) {
            assertThrows(Handshake.Failed.class, () -> Handshake.open(none, JobToken.NONE, Handshake.Kind.STORE,
                    Duration.ofSeconds(10)));
        }
        int code = job.exit(180);
        String err = job.stderr();
        assertEquals(0, code, err);
        assertArrayEquals(MultiProcessCommandTest.losses(refOut.resolve("summary.json")),
                MultiProcessCommandTest.losses(out.resolve("summary.json")), "the intruders changed nothing");
        List<String> refusals = err.lines().filter(l -> l.startsWith(RefusalLog.PREFIX)).toList();
        assertEquals(1, refusals.size(), "once for 127.0.0.1: " + err);
        assertTrue(refusals.get(0).startsWith(RefusalLog.PREFIX + "the rendezvous store from 127.0.0.1:"), refusals.get(0));
        assertTrue(err.lines().noneMatch(l -> l.startsWith("error: ")), err);

        assertNowhere(token, List.of(out, saves), List.of(err, String.join("\n", job.lines())));
        assertNowhere(made, List.of(refOut, refSaves), List.of(ref.stderr(), String.join("\n", ref.lines())));
    }

    @Test
    void aSecondJobWithAnotherTokenOnARunningJobsPortFailsAtOnceInOneLine() throws Exception {
        int port = freePort();
        ChildJvm running = launch("running", Map.of(), port, "--steps", "100000");
        running.await("step 1/");
        String other = newToken();
        List<ChildJvm> second = new ArrayList<>();
        long start = System.nanoTime();
        for (int r = 0; r < 2; r++) {
            second.add(ChildJvm.start(dir.resolve("second" + r + ".err"), Map.of("RANK", "" + r, "WORLD_SIZE", "2",
                    "LOCAL_RANK", "" + r, "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port,
                    JobToken.VARIABLE, other), new ArrayList<>(RUN)));
        }
        String[] expected = {"cannot serve the rendezvous store on 127.0.0.1 port " + port,
                "the rendezvous store at 127.0.0.1:" + port + " belongs to another job"};
        for (int r = 0; r < 2; r++) {
            ChildJvm c = second.get(r);
            int code = c.exit(60);
            String err = c.stderr();
            assertEquals(ExitCode.RENDEZVOUS_FAILED.code(), code, err);
            assertEquals(1, err.strip().lines().count(), "one line: " + err);
            assertTrue(err.startsWith("error: ") && err.contains(expected[r]), err);
            assertFalse(err.contains(other));
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        assertTrue(seconds < 30, "at once, not after the 30 s timeout: " + seconds + " s");
        assertTrue(running.process().isAlive(), "the running job goes on: " + running.stderr());
        new ProcessBuilder("kill", "-TERM", Long.toString(running.process().pid())).start().waitFor();
        assertEquals(ExitCode.SIGTERM.code(), running.exit(60), running.stderr());
        assertEquals(1, running.stderr().lines().filter(l -> l.startsWith(RefusalLog.PREFIX)).count(), running.stderr());
    }

    @Test
    void aRunThatMaySpanHostsWithoutATokenStopsAtStartInOneLine() throws Exception {
        List<String> train = List.of("train", "--device", "cpu", "--preset", "tiny", "--steps", "1");
        List<String> byFlags = new ArrayList<>(train);
        byFlags.addAll(List.of("--processes", "2", "--process-rank", "1", "--master-addr", "203.0.113.7"));
        List<String> launchTwoNodes = new ArrayList<>(List.of("launch", "--nnodes", "2", "--node-rank", "0", "--master-addr",
                "127.0.0.1", "--"));
        launchTwoNodes.addAll(train);
        Map<String, String> slurm = Map.of("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_NTASKS_PER_NODE", "1",
                "SLURM_NODEID", "0", "SLURM_JOB_NODELIST", "node[01-02]", "SLURM_JOB_ID", "4242");
        Map<String, String> noFile = Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1",
                JobToken.FILE_VARIABLE, dir.resolve("no-such-token").toString());
        List<ChildJvm> runs = List.of(
                ChildJvm.start(dir.resolve("flags.err"), Map.of(), byFlags),
                ChildJvm.start(dir.resolve("slurm.err"), slurm, train),
                ChildJvm.start(dir.resolve("launch.err"), Map.of(), launchTwoNodes),
                ChildJvm.start(dir.resolve("nofile.err"), noFile, train));
        String[] expected = {"the master address 203.0.113.7 is not this host's loopback",
                "the master address node01 is not this host's loopback",
                "launch --nnodes 2 needs the job's token, the same on every node",
                "which is missing"};
        for (int i = 0; i < runs.size(); i++) {
            ChildJvm c = runs.get(i);
            int code = c.exit(60);
            String err = c.stderr();
            assertEquals(ExitCode.BAD_INPUT.code(), code, err);
            assertEquals(1, err.strip().lines().count(), "one line: " + err);
            assertTrue(err.startsWith("error: ") && err.contains(expected[i]), err);
            if (i < 3) {
                assertTrue(err.contains("FSDP4J_JOB_TOKEN_FILE"), "says how to give one: " + err);
            }
            assertTrue(c.lines().isEmpty(), "nothing ran: " + c.lines());
        }
    }
}
