// Preemption in a child JVM, as Slurm or Kubernetes do it: SIGTERM mid-run saves a checkpoint at
// the next step boundary and exits 0, and --resume latest continues to the losses of the
// uninterrupted run, bit for bit; kill -9 in the middle of a save (the writer slowed by a test
// hook) leaves the previous checkpoint loadable and the partial one ignored with a message.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

class PreemptionTest {

    /** A small model whose steps take about a millisecond: the run is long only in steps. */
    private static final String[] RUN = {"--device", "cpu", "--cpu-threads", "1", "--batch-size", "2", "--seq-len", "16",
        "--layers", "1", "--hidden", "32", "--heads", "2", "--context", "16"};
    private static final int STEPS = 3000;

    @TempDir
    Path dir;

    private static Process start(Path err, List<String> jvm, String... args) throws IOException {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"),
                "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "--add-modules", "jdk.incubator.vector"));
        cmd.addAll(jvm);
        cmd.add(Main.class.getName());
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(err.toFile()).start();
    }

    /** Lines of the child's stdout, read on a daemon thread. */
    private static BlockingQueue<String> lines(Process p) {
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String l = r.readLine(); l != null; l = r.readLine()) {
                    lines.add(l);
                }
            } catch (IOException ignored) {
                // the child ended
            }
        });
        t.setDaemon(true);
        t.start();
        return lines;
    }

    private static void await(BlockingQueue<String> lines, Process p, String prefix, Path err) throws Exception {
        List<String> seen = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            String l = lines.poll(200, TimeUnit.MILLISECONDS);
            if (l != null) {
                seen.add(l);
                if (l.startsWith(prefix)) {
                    return;
                }
            } else if (!p.isAlive()) {
                break;
            }
        }
        p.destroyForcibly();
        throw new AssertionError("no line '" + prefix + "' from the child: " + seen + " " + Files.readString(err));
    }

    private static String[] args(String... extra) {
        List<String> a = new ArrayList<>(List.of("train", "--steps", String.valueOf(STEPS)));
        a.addAll(List.of(RUN));
        a.addAll(List.of(extra));
        return a.toArray(String[]::new);
    }

    @Test
    void sigtermSavesAndExitsZeroAndResumeLatestContinuesBitIdentically() throws Exception {
        Path saves = dir.resolve("saves");
        Path err = dir.resolve("child.err");
        Process child = start(err, List.of(), args("--save-dir", saves.toString(), "--out", dir.resolve("a").toString()));
        BlockingQueue<String> lines = lines(child);
        await(lines, child, "step 20/", err);
        assertEquals(0, new ProcessBuilder("kill", "-TERM", String.valueOf(child.pid())).start().waitFor());
        assertTrue(child.waitFor(60, TimeUnit.SECONDS), "the child exits after SIGTERM");
        String stderr = Files.readString(err);
        assertEquals(0, child.exitValue(), stderr);
        JsonNode stopped = new ObjectMapper().readTree(dir.resolve("a/summary.json").toFile());
        int savedAt = stopped.get("steps").asInt();
        assertTrue(stopped.get("interrupted").asBoolean());
        assertTrue(stderr.contains("stopped by SIGTERM after step " + savedAt + " of " + STEPS + "; checkpoint "
                + saves.resolve(String.format("step-%08d", savedAt))), stderr);

        // --resume latest runs the rest in-process; the uninterrupted run gives the same losses, bit for bit
        CliRunner.Result resumed = CliRunner.run(args("--save-dir", saves.toString(), "--resume", "latest", "--out",
                dir.resolve("b").toString()));
        assertEquals(0, resumed.exitCode(), resumed.err());
        assertTrue(resumed.out().contains("resumed from " + saves.resolve(String.format("step-%08d", savedAt))
                + " at step " + savedAt), resumed.out());
        CliRunner.Result whole = CliRunner.run(args("--out", dir.resolve("c").toString()));
        assertEquals(0, whole.exitCode(), whole.err());
        float[] continued = losses(dir.resolve("b"));
        float[] uninterrupted = losses(dir.resolve("c"));
        assertEquals(STEPS, continued.length);
        assertArrayEquals(uninterrupted, continued, "losses of the preempted and resumed run vs the uninterrupted one");
    }

    private static float[] losses(Path out) throws IOException {
        JsonNode l = new ObjectMapper().readTree(out.resolve("summary.json").toFile()).get("losses");
        float[] v = new float[l.size()];
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) l.get(i).asDouble();
        }
        return v;
    }

    @Test
    void killDuringASaveLeavesThePreviousCheckpointAndIgnoresThePartialOne() throws Exception {
        Path saves = dir.resolve("saves");
        Path err = dir.resolve("killed.err");
        // the writer sleeps 300 ms per MiB: a save of the tiny preset (3 buffers × 446k params) takes ~2 s
        Process child = start(err, List.of("-Dfsdp4j.checkpoint.chunkDelayMs=300"), "train", "--steps", "100000",
                "--device", "cpu", "--cpu-threads", "1", "--batch-size", "2", "--seq-len", "16", "--save-dir",
                saves.toString(), "--save-every", "3");
        BlockingQueue<String> lines = lines(child);
        await(lines, child, "checkpoint: step 3 saved", err);
        Path partial = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (partial == null && System.nanoTime() < deadline) {
            try (var list = Files.list(saves)) {
                partial = list.filter(p -> p.getFileName().toString().startsWith(".step-00000006.partial-")).findFirst()
                        .orElse(null);
            }
            Thread.sleep(20);
        }
        assertTrue(partial != null, "the save of step 6 started");
        child.destroyForcibly();                         // SIGKILL, in the middle of writing step 6
        assertTrue(child.waitFor(30, TimeUnit.SECONDS));
        assertTrue(Files.isDirectory(partial), "the partial save is left behind");
        assertTrue(!Files.exists(saves.resolve("step-00000006")), "and never looks complete");

        CliRunner.Result inspect = CliRunner.run("checkpoint", "inspect", saves.toString());
        assertEquals(0, inspect.exitCode(), inspect.err());
        assertTrue(inspect.out().contains("checkpoint: ignoring " + partial + ": a save that did not finish"), inspect.out());
        assertTrue(inspect.out().contains("checkpoint " + saves.resolve("step-00000003")), inspect.out());
        assertTrue(inspect.out().contains("verified: 1 files"), inspect.out());
    }
}
