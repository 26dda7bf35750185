// Runs over several real processes (child JVMs on this machine, the test's classpath), as users
// start them: `fsdp4j launch --standalone` with 2 processes × 2 ranks trains to exactly the
// losses of 4 in-process ranks, and writes a summary.json of all 4 ranks and a metrics.jsonl of
// their maxima, and so do 2 processes given their identity only through Slurm's variables set by
// hand, or only through torchrun's; processes started with different --lr all fail at start
// showing both values; SIGTERM to the
// launcher stops every process after the same step, with a summary of all 4 ranks; a process
// whose host has too little memory fails before step 1 naming the host, and the other ends too.
// What kill -9, SIGSTOP and the other faults do to such a run: FaultMatrixTest.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MultiProcessCommandTest {

    /** A small run: 4 ranks of the tiny model, short sequences, so a child JVM trains it in a second or two. */
    private static final List<String> RUN = List.of("train", "--device", "cpu", "--preset", "tiny", "--batch-size", "8",
            "--seq-len", "32", "--cpu-threads", "2", "--collective-timeout", "30");

    @TempDir
    Path dir;

    static List<String> args(List<String> base, String... more) {
        List<String> a = new ArrayList<>(base);
        a.addAll(List.of(more));
        return a;
    }

    static float[] losses(Path summary) throws IOException {
        JsonNode losses = new ObjectMapper().readTree(summary.toFile()).get("losses");
        float[] out = new float[losses.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = (float) losses.get(i).asDouble();
        }
        return out;
    }

    /** A free port in Slurm's range of ours (29500 + job id mod 10000), and the job id that gives it. */
    private static int[] freeSlurmPort() throws IOException {
        for (int attempt = 0; attempt < 100; attempt++) {
            int job = ThreadLocalRandom.current().nextInt(1, 10_000);
            try (ServerSocket s = new ServerSocket(29_500 + job)) {
                return new int[] {29_500 + job, job};
            } catch (IOException taken) {
                // try another
            }
        }
        throw new IOException("no free port in 29500..39499");
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Two processes started by hand, each with {@code env(rank)}; returns their exit codes and stderr. */
    private List<ChildJvm> twoByHand(java.util.function.IntFunction<Map<String, String>> env,
                                  java.util.function.IntFunction<List<String>> argsOf) throws IOException {
        List<ChildJvm> children = new ArrayList<>();
        for (int r = 0; r < 2; r++) {
            children.add(ChildJvm.start(dir.resolve("err" + r + "-" + System.nanoTime()), env.apply(r), argsOf.apply(r)));
        }
        return children;
    }

    @Test
    void launcherSlurmAndTorchrunRunsTrainExactlyAsFourInProcessRanks() throws Exception {
        Path inProcess = dir.resolve("in-process");
        CliRunner.Result local = CliRunner.run(args(RUN, "--steps", "3", "--world-size", "4", "--out", inProcess.toString())
                .toArray(String[]::new));
        assertEquals(0, local.exitCode(), local.err());
        float[] expected = losses(inProcess.resolve("summary.json"));

        Path launched = dir.resolve("launched");
        ChildJvm launcher = ChildJvm.start(dir.resolve("launch.err"), Map.of(), args(List.of("launch", "--standalone",
                "--nproc-per-node", "2", "--"), args(RUN, "--steps", "3", "--world-size", "4", "--out", launched.toString())
                .toArray(String[]::new)));
        assertEquals(0, launcher.exit(120), launcher.stderr());
        assertArrayEquals(expected, losses(launched.resolve("summary.json")), "fsdp4j launch, 2 processes x 2 ranks");
        assertDescribesEveryRank(inProcess, launched);

        int[] portAndJob = freeSlurmPort();
        Path slurm = dir.resolve("slurm");
        List<ChildJvm> bySlurm = twoByHand(r -> Map.of("SLURM_PROCID", "" + r, "SLURM_NTASKS", "2", "SLURM_LOCALID", "" + r,
                "SLURM_NTASKS_PER_NODE", "2", "SLURM_NODEID", "0", "SLURM_JOB_NODELIST", "localhost",
                "SLURM_JOB_ID", "" + portAndJob[1]),
                r -> args(RUN, "--steps", "3", "--world-size", "4", "--out", slurm.toString()));
        for (ChildJvm c : bySlurm) {
            assertEquals(0, c.exit(120), c.stderr());
        }
        assertArrayEquals(expected, losses(slurm.resolve("summary.json")), "Slurm's variables, 2 processes x 2 ranks");

        int port = freePort();
        Path torchrun = dir.resolve("torchrun");
        List<ChildJvm> byTorchrun = twoByHand(r -> Map.of("RANK", "" + r, "WORLD_SIZE", "2", "LOCAL_RANK", "" + r,
                "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port),
                r -> args(RUN, "--steps", "3", "--world-size", "4", "--out", torchrun.toString()));
        for (ChildJvm c : byTorchrun) {
            assertEquals(0, c.exit(120), c.stderr());
        }
        assertArrayEquals(expected, losses(torchrun.resolve("summary.json")), "torchrun's variables, 2 processes x 2 ranks");
    }

    private static JsonNode json(Path file) throws IOException {
        return new ObjectMapper().readTree(file.toFile());
    }

    private static long[] longs(JsonNode array) {
        long[] out = new long[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = array.get(i).asLong();
        }
        return out;
    }

    /**
     * The run in {@code launched} (2 processes x 2 ranks) wrote the summary a run of 4 ranks in one
     * process writes ({@code inProcess}): the same keys, every per-rank array of 4 ranks, the same
     * bytes kept and sent per rank. Only the workspace differs by design: a reduce-scatter across
     * processes stages the remote members' chunks, which in one process are read where they lie,
     * so the peaks differ by at most the workspace's. Each metrics.jsonl line is the maximum over
     * the 4 ranks of that step.
     */
    private static void assertDescribesEveryRank(Path inProcess, Path launched) throws IOException {
        JsonNode one = json(inProcess.resolve("summary.json"));
        JsonNode two = json(launched.resolve("summary.json"));
        List<String> keys = new ArrayList<>();
        one.fieldNames().forEachRemaining(keys::add);
        List<String> launchedKeys = new ArrayList<>();
        two.fieldNames().forEachRemaining(launchedKeys::add);
        assertEquals(keys, launchedKeys);
        assertEquals(4, two.get("world_size").asInt());
        for (String perRank : List.of("persistent_bytes_per_rank", "comm_bytes_per_rank")) {
            long[] got = longs(two.get(perRank));
            assertArrayEquals(longs(one.get(perRank)), got, perRank);
            assertTrue(java.util.Arrays.stream(got).allMatch(b -> b > 0), perRank + ": every rank holds state and sends");
        }
        assertArrayEquals(longs(one.get("memory_check").get("measured_persistent_bytes_per_rank")),
                longs(two.get("memory_check").get("measured_persistent_bytes_per_rank")));
        assertEquals(4, two.get("memory_check").get("measured_peak_bytes_per_rank").size());
        long[] peaks = longs(two.get("peak_bytes_per_rank"));
        long[] peaksInProcess = longs(one.get("peak_bytes_per_rank"));
        long[] atPeakSum = new long[4];
        for (String category : List.of("params", "grads", "optimizer", "gathered", "activations", "workspace")) {
            long[] byCategory = longs(two.get("peak_bytes_by_category").get(category));
            assertEquals(4, byCategory.length, category);
            if (!category.equals("workspace")) {
                assertArrayEquals(longs(one.get("peak_bytes_by_category").get(category)), byCategory, category);
            }
            long[] atPeak = longs(two.get("bytes_at_peak_by_category").get(category));
            assertEquals(4, atPeak.length, category);
            for (int r = 0; r < 4; r++) {
                atPeakSum[r] += atPeak[r];
            }
        }
        long[] workspace = longs(two.get("peak_bytes_by_category").get("workspace"));
        long[] workspaceInProcess = longs(one.get("peak_bytes_by_category").get("workspace"));
        for (int r = 0; r < 4; r++) {
            assertEquals(peaks[r], atPeakSum[r], "rank " + r + ": the split at its peak sums to its peak");
            assertTrue(Math.abs(peaks[r] - peaksInProcess[r]) <= Math.max(workspace[r], workspaceInProcess[r]),
                    "rank " + r + ": peak " + peaks[r] + " vs " + peaksInProcess[r] + " in one process");
        }
        long maxPeak = java.util.Arrays.stream(peaks).max().orElseThrow();
        long maxPeakOfLines = 0;
        List<String> lines = Files.readAllLines(launched.resolve("metrics.jsonl"));
        List<String> linesInProcess = Files.readAllLines(inProcess.resolve("metrics.jsonl"));
        assertEquals(linesInProcess.size(), lines.size());
        for (int i = 0; i < lines.size(); i++) {
            JsonNode line = new ObjectMapper().readTree(lines.get(i));
            JsonNode lineInProcess = new ObjectMapper().readTree(linesInProcess.get(i));
            assertTrue(line.get("peak_bytes").asLong() <= maxPeak, lines.get(i));
            maxPeakOfLines = Math.max(maxPeakOfLines, line.get("peak_bytes").asLong());
            assertEquals(lineInProcess.get("live_bytes").asLong(), line.get("live_bytes").asLong(), lines.get(i));
            assertEquals(lineInProcess.get("comm_bytes").asLong(), line.get("comm_bytes").asLong(), lines.get(i));
            long split = 0;
            for (JsonNode b : line.get("bytes_at_peak_by_category")) {
                split += b.asLong();
            }
            assertEquals(line.get("peak_bytes").asLong(), split, lines.get(i));
        }
        assertEquals(maxPeak, maxPeakOfLines, "the highest peak of any rank is the highest of the steps' maxima");
    }

    @Test
    void launchRefusesWhatCannotWorkInOneLine() {
        String[][] cases = {
                {"launch", "--nnodes", "2", "--", "train"},                        // no master address
                {"launch", "--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "--", "train"},
                {"launch", "--standalone", "--nnodes", "2", "--", "train"},
                {"launch", "--standalone", "--", "java", "-version"},               // not an fsdp4j command
                {"launch", "--standalone", "--nproc-per-node", "0", "--", "train"}};
        String[] expected = {"--master-addr is required with --nnodes 2", "--node-rank 2 is outside 0..1",
                "--standalone runs one node", "launch runs an fsdp4j command", "--nproc-per-node must be between 1"};
        for (int i = 0; i < cases.length; i++) {
            CliRunner.Result r = CliRunner.run(cases[i]);
            assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode(), String.join(" ", cases[i]) + ": " + r.err());
            assertTrue(r.err().startsWith("error: ") && r.err().contains(expected[i]), r.err());
            assertEquals(1, r.err().strip().lines().count(), r.err());
        }
        CliRunner.Result alone = CliRunner.run("train", "--processes", "2", "--process-rank", "0", "--device", "cuda:0", "--steps", "1");
        assertEquals(ExitCode.BAD_INPUT.code(), alone.exitCode(), alone.err());
    }

    @Test
    void processesStartedWithAnotherLrAllFailAtStartShowingBothValues() throws Exception {
        int port = freePort();
        List<ChildJvm> children = twoByHand(r -> Map.of("RANK", "" + r, "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1",
                "MASTER_PORT", "" + port), r -> args(RUN, "--steps", "3", "--lr", r == 0 ? "1e-3" : "2e-3"));
        for (ChildJvm c : children) {
            assertEquals(ExitCode.SETTINGS_DIFFER.code(), c.exit(60), c.stderr());
            String err = c.stderr();
            assertTrue(err.contains("lr: 0.001 (process 0), 0.002 (process 1)"), err);
            assertEquals(1, err.strip().lines().count(), "one line: " + err);
        }
    }

    @Test
    void sigtermToTheLauncherStopsEveryProcessAfterTheSameStep() throws Exception {
        Path out = dir.resolve("stopped");
        ChildJvm launcher = ChildJvm.start(dir.resolve("term.err"), Map.of(), args(List.of("launch", "--standalone",
                "--nproc-per-node", "2", "--"), args(RUN, "--steps", "100000", "--world-size", "4", "--out", out.toString())
                .toArray(String[]::new)));
        launcher.await("step 2/");
        new ProcessBuilder("kill", "-TERM", Long.toString(launcher.process().pid())).start().waitFor();
        assertEquals(ExitCode.SIGTERM.code(), launcher.exit(60), launcher.stderr());
        JsonNode summary = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        assertTrue(summary.get("interrupted").asBoolean(), summary.toString());
        assertEquals(4, summary.get("persistent_bytes_per_rank").size(), "every rank's: " + summary);
        assertEquals(4, summary.get("comm_bytes_per_rank").size(), "every rank's: " + summary);
        assertTrue(summary.get("ranks_in_per_rank_arrays") == null, summary.toString());
        String err = launcher.stderr();
        assertEquals(2, err.lines().filter(l -> l.startsWith("interrupted by SIGTERM after step " + summary.get("steps")))
                .count(), "both processes stop after the same step: " + err);
    }

    @Test
    void aHostWithTooLittleMemoryForItsRanksFailsBeforeStepOneNamingItAndTheOtherProcessEnds() throws Exception {
        // both processes on this host hold 2 ranks each: process 1 is given room for fewer than its host's 4
        int port = freePort();
        List<ChildJvm> children = twoByHand(r -> Map.of("RANK", "" + r, "WORLD_SIZE", "2", "LOCAL_RANK", "" + r,
                "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port),
                r -> r == 0 ? args(RUN, "--steps", "3", "--world-size", "4")
                        : args(RUN, "--steps", "3", "--world-size", "4", "--memory-limit", "12MiB"));
        ChildJvm short1 = children.get(1);
        assertEquals(ExitCode.OUT_OF_MEMORY.code(), short1.exit(60), short1.stderr());
        String err = short1.stderr();
        String host = java.net.InetAddress.getLocalHost().getHostName();
        assertEquals(1, err.strip().lines().count(), "one line: " + err);
        assertTrue(err.startsWith("error: the run needs ≈ ") && err.contains("of host RAM on host " + host + " at its peak (4 ranks × ")
                && err.contains("12.00 MiB is available"), err);
        ChildJvm other = children.get(0);
        int code = other.exit(60);
        assertEquals(ExitCode.RANK_FAILED.code(), code, other.stderr());
        assertTrue(other.stderr().contains("process 1 (host " + host + ") failed: the run needs"), other.stderr());
        assertTrue(other.lines().stream().noneMatch(l -> l.startsWith("step 1/")), "no step ran: " + other.lines());
    }
}
