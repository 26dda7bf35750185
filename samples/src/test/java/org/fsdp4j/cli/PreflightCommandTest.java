// Before the first step `train` prints the preflight's peak-memory and step-time estimates, and
// refuses (exit 4, one line with the figures and the flags that would fit) a run whose estimate
// exceeds the memory available, here the limit the test gives with --memory-limit; --force runs
// it anyway. A buffer over the CPU backend's 2 GiB is refused even then.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class PreflightCommandTest {

    private static final String[] RUN = {"train", "--steps", "2", "--batch-size", "8", "--seq-len", "64", "--device", "cpu",
        "--cpu-threads", "1"};

    private static String[] with(String... extra) {
        String[] args = java.util.Arrays.copyOf(RUN, RUN.length + extra.length);
        System.arraycopy(extra, 0, args, RUN.length, extra.length);
        return args;
    }

    @Test
    void printsTheEstimateAndItMatchesTheMeasuredPeak() {
        CliRunner.Result r = CliRunner.run(RUN);
        assertEquals(0, r.exitCode(), r.err());
        String line = r.out().lines().filter(l -> l.startsWith("  preflight: ")).findFirst().orElseThrow();
        assertTrue(line.contains("host RAM available") && line.contains("/step, about "), line);
        // the step time is a guess from a GEMM probe, and the line says so (on a busy machine it can be far off)
        assertTrue(line.endsWith(" for 2 steps (estimated from a short GEMM probe, not a measured step)"), line);
        double estimate = mib(line, "peak ≈ ");
        double measured = mib(r.out().lines().filter(l -> l.startsWith("step 1/")).findFirst().orElseThrow(), "mem ");
        assertTrue(Math.abs(estimate / measured - 1) <= 0.2, line + " vs measured " + measured + " MiB");
    }

    private static double mib(String line, String after) {
        Matcher m = Pattern.compile(Pattern.quote(after) + "([\\d.]+) (KiB|MiB)").matcher(line);
        assertTrue(m.find(), line);
        return Double.parseDouble(m.group(1)) / (m.group(2).equals("KiB") ? 1024 : 1);
    }

    @Test
    void refusesARunOverTheMemoryLimitWithTheFlagsThatFit() {
        // tiny at 8 × 64 tokens: ≈ 6.8 MiB of state and ≈ 11.5 MiB of activations
        CliRunner.Result r = CliRunner.run(with("--memory-limit", "12MiB"));
        assertEquals(ExitCode.OUT_OF_MEMORY.code(), r.exitCode(), r.err());
        List<String> err = r.err().lines().toList();
        assertEquals(1, err.size(), r.err());
        String line = err.get(0);
        assertTrue(line.startsWith("error: the run needs ≈ ") && line.contains("of host RAM at its peak")
                && line.contains("12.00 MiB is available"), line);
        assertTrue(line.contains("it fits with ") && line.contains("--force runs it anyway"), line);
        assertFalse(r.out().contains("step 1/"), r.out());
    }

    @Test
    void forceRunsItAnywayAndSaysSo() {
        CliRunner.Result r = CliRunner.run(with("--memory-limit", "12MiB", "--force"));
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("12.00 MiB host RAM available (OVER: --force)"), r.out());
    }

    @Test
    void aBufferTheCpuCannotHoldIsRefusedEvenWithForce() {
        CliRunner.Result r = CliRunner.run("train", "--batch-size", "100000", "--force", "--device", "cpu");
        assertEquals(ExitCode.OUT_OF_MEMORY.code(), r.exitCode(), r.err());
        assertTrue(r.err().startsWith("error: one buffer of the step needs ") && r.err().contains("--micro-batches "),
                r.err());
        assertFalse(r.out().contains("step 1/"), r.out());
    }
}
