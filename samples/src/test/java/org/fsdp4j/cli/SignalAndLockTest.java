// A training run in a child JVM (the test's classpath, org.fsdp4j.cli.Main), as a user starts
// one: while it runs, a second run into its --out is refused (exit 5); SIGINT and SIGTERM end it
// after the step in progress with one line, exit 130 and 143, and a summary.json of the steps
// done marked interrupted (the earlier summary in that directory is gone from the start); two
// quick SIGINTs abandon the step in progress and still write the summary.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SignalAndLockTest {

    private static final int STEPS = 100_000;

    @TempDir
    Path dir;

    /** A child `fsdp4j train` whose stdout lines arrive in a queue; stderr goes to a file. */
    private record Child(Process process, BlockingQueue<String> lines, List<String> seen, Path err) {

        static Child start(Path out, Path err, String... extra) throws IOException {
            String java = ProcessHandle.current().info().command().orElse("java");
            List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"),
                    "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "--add-modules", "jdk.incubator.vector",
                    Main.class.getName(), "train", "--steps",
                    String.valueOf(STEPS), "--device", "cpu", "--cpu-threads", "1", "--out", out.toString()));
            cmd.addAll(List.of(extra));
            Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
            BlockingQueue<String> lines = new LinkedBlockingQueue<>();
            Thread reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String l = r.readLine(); l != null; l = r.readLine()) {
                        lines.add(l);
                    }
                } catch (IOException ignored) {
                    // the child ended
                }
            });
            reader.setDaemon(true);
            reader.start();
            return new Child(p, lines, new ArrayList<>(), err);
        }

        /** Waits (60 s at most) for a stdout line starting with {@code prefix}. */
        void await(String prefix) throws InterruptedException, IOException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline) {
                String l = lines.poll(1, TimeUnit.SECONDS);
                if (l != null) {
                    seen.add(l);
                    if (l.startsWith(prefix)) {
                        return;
                    }
                } else if (!process.isAlive()) {
                    break;
                }
            }
            process.destroyForcibly();
            throw new AssertionError("no line '" + prefix + "...' from the child: " + seen + " " + Files.readString(err));
        }

        /** Sends {@code signal} ("INT", "TERM") with kill(1). */
        void signal(String signal) throws IOException, InterruptedException {
            assertEquals(0, new ProcessBuilder("kill", "-" + signal, String.valueOf(process.pid())).start().waitFor());
        }

        int exitCode() throws InterruptedException {
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new AssertionError("the child did not exit within 60 s of the signal");
            }
            return process.exitValue();
        }
    }

    /** The child's stderr lines less the JVM's own notice that it runs the incubating Vector API module. */
    private static List<String> fsdp4jLines(Path err) throws IOException {
        List<String> lines = new ArrayList<>(Files.readAllLines(err));
        lines.removeIf(l -> l.startsWith("WARNING: Using incubator modules: jdk.incubator.vector"));
        return lines;
    }

    /** Whether the child ignores SIGINT (started from a non-interactive shell's background job): then it must. */
    private static boolean ignoresSigint(Process p) throws IOException {
        Path status = Path.of("/proc/" + p.pid() + "/status");
        if (!Files.exists(status)) {
            return false;
        }
        for (String line : Files.readAllLines(status)) {
            if (line.startsWith("SigIgn:")) {
                return (Long.parseLong(line.substring(7).trim(), 16) & (1L << 1)) != 0;   // bit 1: signal 2
            }
        }
        return false;
    }

    private static JsonNode summary(Path out) throws IOException {
        return new ObjectMapper().readTree(out.resolve("summary.json").toFile());
    }

    private void interrupts(String signal, ExitCode expected) throws Exception {
        Path out = Files.createDirectories(dir.resolve(signal));
        Files.writeString(out.resolve("summary.json"), "{\"from\": \"an earlier run\"}");
        Child child = Child.start(out, dir.resolve(signal + ".err"), "--batch-size", "2", "--seq-len", "16");
        try {
            child.await("step 3/");
            assumeFalse(signal.equals("INT") && ignoresSigint(child.process()),
                    "SIGINT is ignored in this environment (a background job of a non-interactive shell)");
            assertFalse(Files.exists(out.resolve("summary.json")), "the earlier run's summary is removed at the start");

            CliRunner.Result second = CliRunner.run("train", "--steps", "1", "--device", "cpu", "--out", out.toString());
            assertEquals(ExitCode.OUTPUT_IN_USE.code(), second.exitCode(), second.err());
            assertEquals(1, second.err().lines().count(), second.err());
            assertTrue(second.err().contains("is in use by another run (pid " + child.process().pid() + ", fsdp4j train"),
                    second.err());

            child.signal(signal);
            assertEquals(expected.code(), child.exitCode(), Files.readString(child.err()));
        } finally {
            child.process().destroyForcibly();
        }
        List<String> err = fsdp4jLines(child.err());
        assertEquals(1, err.size(), err.toString());
        assertTrue(err.get(0).startsWith("interrupted by SIG" + signal + " after step "), err.get(0));
        JsonNode s = summary(out);
        assertTrue(s.get("interrupted").asBoolean(), s.toString());
        assertEquals("SIG" + signal, s.get("interrupted_by").asText());
        int steps = s.get("steps").asInt();
        assertTrue(steps >= 3 && steps < STEPS, "steps " + steps);
        assertEquals(steps, s.get("losses").size());
        assertEquals(STEPS, s.get("planned_steps").asInt());
        assertTrue(err.get(0).contains("after step " + steps + " of " + STEPS), err.get(0));
    }

    @Test
    void sigintWritesAnInterruptedSummary() throws Exception {
        interrupts("INT", ExitCode.SIGINT);
    }

    @Test
    void sigtermWritesAnInterruptedSummary() throws Exception {
        interrupts("TERM", ExitCode.SIGTERM);
    }

    @Test
    void aSecondSignalAbandonsTheStepInProgress() throws Exception {
        Path out = dir.resolve("abandon");
        // a step of seconds on one thread (~80 GFLOP), so that two signals 300 ms apart land inside it
        Child child = Child.start(out, dir.resolve("abandon.err"), "--preset", "small", "--batch-size", "32");
        try {
            child.await("  preflight: ");
            assumeFalse(ignoresSigint(child.process()), "SIGINT is ignored in this environment");
            child.signal("INT");
            Thread.sleep(300);                  // two signals sent at once may arrive as one
            child.signal("INT");
            assertEquals(ExitCode.SIGINT.code(), child.exitCode(), Files.readString(child.err()));
        } finally {
            child.process().destroyForcibly();
        }
        List<String> err = fsdp4jLines(child.err());
        assertEquals(1, err.size(), err.toString());
        assertTrue(err.get(0).startsWith("interrupted by SIGINT during step ")
                && err.get(0).contains("(abandoned: a second signal came)"), err.get(0));
        JsonNode s = summary(out);
        assertTrue(s.get("interrupted").asBoolean(), s.toString());
        assertEquals(s.get("steps").asInt(), s.get("losses").size());
    }
}
