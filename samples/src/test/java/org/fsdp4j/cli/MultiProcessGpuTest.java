// GPU ranks across processes, on the stand-in CUDA and NCCL (host memory and the emulator, not a
// GPU; the stand-in NCCL meets the ranks of several processes through the address its unique id
// carries): `fsdp4j launch --standalone --nproc-per-node 2 -- train --device cuda --world-size 4`
// (2 processes x 2 stand-in GPUs, NCCL's unique id through the rendezvous store) trains to exactly
// the losses of 4 ranks on 4 stand-in GPUs of one process, full_shard, hybrid_shard and bf16 alike,
// and to the CPU's within fp32's (bf16's) tolerance; its checkpoint resumes on 4 GPUs of one
// process to the same bits and on 4 CPU processes within 1e-6. And its failures end the job as a
// user needs: kill -9 of a process before its ranks connect, mid-step or mid-save, and SIGSTOP
// under a short --collective-timeout, each end every process with exit code 7 and one line naming
// the failed process, its ranks and host, within the timeout plus 10 s, with nothing left running
// and no partial checkpoint taken for the latest; so do kill -9 and SIGSTOP of process 0, which
// serves the rendezvous store. Fake-GPU run only (tag "standin").
package org.fsdp4j.cli;

import static org.fsdp4j.cli.MultiProcessCommandTest.args;
import static org.fsdp4j.cli.MultiProcessCommandTest.losses;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.fsdp4j.cuda.StandIns;
import org.fsdp4j.dist.FaultPoint;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("standin")
class MultiProcessGpuTest {

    /** Small shapes: the stand-in runs every kernel on the emulator. */
    private static final List<String> RUN = List.of("train", "--preset", "tiny", "--batch-size", "4", "--seq-len", "32",
            "--world-size", "4");
    /** Every child sees four stand-in GPUs: one process takes all four, or two take two each. */
    private static final Map<String, String> FOUR_GPUS = Map.of("FSDP4J_STANDIN_DEVICES", "4");

    @TempDir
    Path dir;

    /** The JVM flags that make a child JVM load the stand-ins, as this test JVM does. */
    private static List<String> standInJvm(String... more) {
        List<String> jvm = new ArrayList<>();
        for (String p : List.of("org.bytedeco.javacpp.platform.linkpath", "org.bytedeco.javacpp.cachedir",
                StandIns.PROPERTY)) {
            jvm.add("-D" + p + "=" + System.getProperty(p));
        }
        jvm.add("-Xss4m");
        jvm.addAll(List.of(more));
        return jvm;
    }

    private ChildJvm launch(String name, List<String> jvm, List<String> train, String... launchFlags)
            throws IOException {
        List<String> cmd = new ArrayList<>(List.of("launch", "--standalone", "--nproc-per-node", "2"));
        cmd.addAll(List.of(launchFlags));
        cmd.add("--");
        cmd.addAll(train);
        return ChildJvm.start(dir.resolve(name + ".err"), FOUR_GPUS, jvm, cmd);
    }

    private ChildJvm alone(String name, List<String> train) throws IOException {
        return ChildJvm.start(dir.resolve(name + ".err"), FOUR_GPUS, standInJvm(), train);
    }

    @Test
    void twoProcessesOfTwoGpusTrainExactlyAsFourGpusOfOneProcess() throws Exception {
        StandIns.assumeStandIns();
        for (List<String> strategy : List.of(List.of("--strategy", "full_shard"),
                List.of("--strategy", "hybrid_shard", "--shard-group-size", "2"),
                List.of("--strategy", "full_shard", "--param-dtype", "bf16"))) {
            String name = String.join("-", strategy).replace("--", "");
            boolean bf16 = strategy.contains("bf16");
            Path one = dir.resolve(name + "-one-process");
            ChildJvm single = alone(name + "-one", concat(RUN, strategy, "--device", "cuda",
                    "--steps", "3", "--out", one.toString()));
            assertEquals(0, single.exit(300), single.stderr());

            Path two = dir.resolve(name + "-two-processes");
            ChildJvm launched = launch(name + "-two", standInJvm(), concat(RUN, strategy,
                    "--device", "cuda", "--steps", "3", "--out", two.toString()));
            assertEquals(0, launched.exit(300), launched.stderr());
            float[] expected = losses(one.resolve("summary.json"));
            assertEquals(3, expected.length);
            assertArrayEquals(expected, losses(two.resolve("summary.json")), name + ": 2 processes x 2 stand-in GPUs, "
                    + "NCCL across processes, against 4 stand-in GPUs of one process: the same arithmetic, the same bits");

            CliRunner.Result cpu = CliRunner.run(concat(RUN, strategy, "--device", "cpu", "--steps", "3", "--out",
                    dir.resolve(name + "-cpu").toString()).toArray(String[]::new));
            assertEquals(0, cpu.exitCode(), cpu.err());
            float[] onCpu = losses(dir.resolve(name + "-cpu").resolve("summary.json"));
            // as StandInTrainTest: kernels sum in other orders than the CPU's (fp32: a few ulps compounded over the
            // steps; bf16: both round activations to 8 significant bits in different orders, a couple of 2^-8)
            double tol = bf16 ? 2 * 0x1p-8 : 1e-5;
            for (int s = 0; s < onCpu.length; s++) {
                assertEquals(onCpu[s], expected[s], tol * Math.abs(onCpu[s]), name + ": step " + (s + 1) + " against the CPU");
            }
        }
    }

    @Test
    void aCheckpointOfTwoProcessesResumesOnFourGpusOfOneProcessAndOnFourCpuProcesses() throws Exception {
        StandIns.assumeStandIns();
        Path saves = dir.resolve("saves");
        Path whole = dir.resolve("whole");
        ChildJvm saved = launch("save", standInJvm(), concat(RUN, List.of(), "--device", "cuda", "--steps", "6",
                "--save-every", "3", "--save-dir", saves.toString(), "--out", whole.toString()));
        assertEquals(0, saved.exit(300), saved.stderr());
        float[] expected = losses(whole.resolve("summary.json"));
        Path step3 = saves.resolve("step-00000003");

        Path onGpus = dir.resolve("one-process");
        ChildJvm one = alone("resume-gpus", concat(RUN, List.of(), "--device", "cuda", "--steps", "6", "--resume",
                step3.toString(), "--out", onGpus.toString()));
        assertEquals(0, one.exit(300), one.stderr());
        assertArrayEquals(expected, losses(onGpus.resolve("summary.json")), "resumed on 4 stand-in GPUs of one process:"
                + " the same state, the same arithmetic");

        Path onCpus = dir.resolve("four-cpu-processes");
        ChildJvm four = ChildJvm.start(dir.resolve("resume-cpus.err"), Map.of(), List.of(), concat(List.of("launch",
                "--standalone", "--nproc-per-node", "4", "--"), concat(RUN, List.of(), "--device", "cpu", "--cpu-threads",
                "1", "--steps", "6", "--resume", step3.toString(), "--out", onCpus.toString())));
        assertEquals(0, four.exit(300), four.stderr());
        float[] cpu = losses(onCpus.resolve("summary.json"));
        double worst = 0;
        for (int s = 3; s < 6; s++) {
            worst = Math.max(worst, Math.abs(cpu[s] - expected[s]) / Math.abs(expected[s]));
        }
        System.out.println("stand-in GPUs 2x2 checkpoint resumed on 4 CPU processes: steps 4-6 within " + worst + " relative");
        assertTrue(worst <= 1e-6, "resumed on the CPU: steps 4-6 within 1e-6 of the GPU run, got " + worst);
    }

    @Test
    void killMinusNineMidSaveEndsTheJobAndLeavesNoCheckpointForTheLatest() throws Exception {
        StandIns.assumeStandIns();
        Path saves = dir.resolve("saves");
        ChildJvm launcher = launch("mid-save", standInJvm("-Dfsdp4j.checkpoint.chunkDelayMs=1000"), concat(RUN,
                List.of(), "--device", "cuda", "--steps", "100000", "--save-every", "2", "--save-dir", saves.toString(),
                "--collective-timeout", "30"));
        launcher.await("checkpoint: step 2 saved");
        Path partial = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (partial == null && System.nanoTime() < deadline) {       // process 1 writing its first file of step 4
            try (var list = java.nio.file.Files.list(saves)) {
                partial = list.filter(p -> p.getFileName().toString().startsWith(".step-00000004.partial-"))
                        .filter(p -> java.nio.file.Files.exists(p.resolve("rank-00002.bin"))).findFirst().orElse(null);
            }
            Thread.sleep(20);
        }
        assertTrue(partial != null, "the save of step 4 started: " + launcher.stderr());
        String name = partial.getFileName().toString();
        long processZero = Long.parseLong(name.substring(name.lastIndexOf('-') + 1));
        ProcessHandle victim = launcher.process().children().filter(p -> p.pid() != processZero).findFirst().orElseThrow();
        killAndExpectTheDeathNamed(launcher, victim.pid(), "step 4.*");
        assertTrue(!java.nio.file.Files.exists(saves.resolve("step-00000004")) && !java.nio.file.Files.exists(
                partial.resolve("index.json")), "the interrupted save never looks complete");
        assertTrue(java.nio.file.Files.isRegularFile(saves.resolve("step-00000002").resolve("index.json")),
                "the previous checkpoint stays the latest");
    }

    @Test
    void killMinusNineBeforeNcclInitEndsTheJobNamingTheProcess() throws Exception {
        StandIns.assumeStandIns();
        ChildJvm launcher = launch("early", standInJvm("-D" + FaultPoint.PROPERTY + "="
                + FaultPoint.BEFORE_RANKS_CONNECT + "@1"), concat(RUN, List.of(), "--device", "cuda", "--steps", "3",
                "--collective-timeout", "30"));
        long victim = launcher.pausedPid(FaultPoint.BEFORE_RANKS_CONNECT);
        long start = System.nanoTime();
        new ProcessBuilder("kill", "-9", Long.toString(victim)).start().waitFor();
        int code = launcher.exit(30 + 10);
        String err = launcher.stderr();
        assertEquals(ExitCode.RANK_FAILED.code(), code, err);
        assertTrue((System.nanoTime() - start) / 1e9 < 15, "the store tells of the death within seconds: " + err);
        assertTrue(err.matches("(?s).*error: [^\\n]*process 1 \\(ranks 2-3, host [^)]+\\) ended without a word[^\\n]*"
                + "ncclCommInitRank of 'world' at rank [01] \\(process 0, host [^)]+\\).*"), err);
        assertEquals(1, err.lines().filter(l -> l.startsWith("error: ")).count(), "one line, from the survivor: " + err);
        assertNothingLeft(launcher);
    }

    @Test
    void killMinusNineMidStepEndsTheJobNamingTheProcessAndTheCollective() throws Exception {
        StandIns.assumeStandIns();
        ChildJvm launcher = launch("mid", standInJvm(), concat(RUN, List.of(), "--device", "cuda",
                "--steps", "100000", "--collective-timeout", "30"));
        launcher.await("step 1/");
        ProcessHandle victim = launcher.process().children().max((a, b) -> Long.compare(a.pid(), b.pid())).orElseThrow();
        killAndExpectTheDeathNamed(launcher, victim.pid(),
                "(allGather|reduceScatter|allReduce|barrier) #\\d+ on 'world[^']*' at rank [01] .*");
    }

    @Test
    void aStoppedProcessIsNamedByTheWatchdogAndTheJobEnds() throws Exception {
        StandIns.assumeStandIns();
        ChildJvm launcher = launch("hang", standInJvm(), concat(RUN, List.of(), "--device", "cuda",
                "--steps", "100000", "--collective-timeout", "5"), "--grace", "1");
        launcher.await("step 1/");
        ProcessHandle stopped = launcher.process().children().max((a, b) -> Long.compare(a.pid(), b.pid())).orElseThrow();
        long start = System.nanoTime();
        new ProcessBuilder("kill", "-STOP", Long.toString(stopped.pid())).start().waitFor();
        int code = launcher.exit(5 + 10 + 10);
        double seconds = (System.nanoTime() - start) / 1e9;
        String err = launcher.stderr();
        assertEquals(ExitCode.RANK_FAILED.code(), code, err);
        assertTrue(seconds < 5 + 10, "watchdog 5 s, then the heartbeat check, grace 1 s: took " + seconds + " s");
        assertTrue(err.matches("(?s).*error: [^\\n]*(allGather|reduceScatter|allReduce|barrier) #\\d+ on 'world[^']*' at rank"
                + " [01] \\(process 0, host [^)]+\\) \\(cuda:[01]\\) did not complete within 5 s: process 1 \\(ranks 2-3, host"
                + " [^)]+\\) stopped answering.*"), err);
        assertTrue(stopped.onExit().get(10, TimeUnit.SECONDS) != null, "the stopped process is killed, not left behind");
    }

    @Test
    void killMinusNineOfTheStoresProcessMidStepEndsTheJobNamingIt() throws Exception {
        StandIns.assumeStandIns();
        ChildJvm launcher = launch("store-mid", standInJvm(), concat(RUN, List.of(), "--device", "cuda",
                "--steps", "100000", "--collective-timeout", "30"));
        String err = faultProcessZero(launcher, "-9", 30);
        assertEquals(1, err.lines().filter(l -> l.startsWith("error: ")).count(), "one line, from the survivor: " + err);
    }

    @Test
    void aStoppedStoreProcessIsNamedByTheWatchdogAndTheJobEnds() throws Exception {
        StandIns.assumeStandIns();
        ChildJvm launcher = launch("store-hang", standInJvm(), concat(RUN, List.of(), "--device", "cuda",
                "--steps", "100000", "--collective-timeout", "5"), "--grace", "1");
        faultProcessZero(launcher, "-STOP", 5);
    }

    /**
     * Sends {@code signal} to process 0 (which serves the store) once a step ran, under a
     * --collective-timeout of {@code timeoutSeconds}: the job ends within the timeout + 10 s with
     * exit 7, its first error line naming process 0, and nothing is left running. Returns stderr.
     */
    private static String faultProcessZero(ChildJvm launcher, String signal, int timeoutSeconds) throws Exception {
        launcher.await("step 1/");
        List<ProcessHandle> all = launcher.process().descendants().toList();
        long start = System.nanoTime();
        new ProcessBuilder("kill", signal, Long.toString(FaultMatrixTest.pidOf(launcher, 0))).start().waitFor();
        int code = launcher.exit(timeoutSeconds + 20);
        double seconds = (System.nanoTime() - start) / 1e9;
        String err = launcher.stderr();
        assertEquals(ExitCode.RANK_FAILED.code(), code, err);
        assertTrue(seconds < timeoutSeconds + 10, "took " + seconds + " s: " + err);
        assertTrue(err.lines().filter(l -> l.startsWith("error: ")).findFirst().orElse("")
                .matches(".*process 0 \\(ranks 0-1, host [^)]+\\).*"), err);
        for (ProcessHandle p : all) {
            assertTrue(p.onExit().get(10, TimeUnit.SECONDS) != null && !p.isAlive(), "left running: " + p.pid());
        }
        return err;
    }

    /**
     * kill -9 of process 1 ({@code pid}, under a --collective-timeout of 30 s): the job ends within
     * the timeout + 10 s with exit 7, its error line naming process 1's death and then matching
     * {@code then} (where the survivor was), and nothing is left running.
     */
    private static void killAndExpectTheDeathNamed(ChildJvm launcher, long pid, String then) throws Exception {
        long start = System.nanoTime();
        new ProcessBuilder("kill", "-9", Long.toString(pid)).start().waitFor();
        int code = launcher.exit(30 + 10);
        String err = launcher.stderr();
        assertEquals(ExitCode.RANK_FAILED.code(), code, err);
        assertTrue((System.nanoTime() - start) / 1e9 < 30 + 10, err);
        assertTrue(err.matches("(?s).*error: [^\\n]*process 1 \\(ranks 2-3, host [^)]+\\) ended without a word[^\\n]*"
                + then), err);
        assertNothingLeft(launcher);
    }

    private static void assertNothingLeft(ChildJvm launcher) {
        launcher.process().descendants().forEach(p -> assertTrue(!p.isAlive(), "left running: " + p.pid()));
    }

    private static List<String> concat(List<String> base, List<String> more, String... flags) {
        List<String> all = new ArrayList<>(base);
        all.addAll(more);
        all.addAll(List.of(flags));
        return all;
    }
}
