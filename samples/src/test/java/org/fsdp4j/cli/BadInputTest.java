// Bad input to `fsdp4j train` ends with one clear line on stderr and a non-zero exit, before
// any training, and never with a stack trace.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BadInputTest {

    @TempDir
    Path dir;

    private static void assertOneLineError(String expected, String... args) {
        CliRunner.Result r = CliRunner.run(args);
        String cmd = String.join(" ", args);
        assertNotEquals(0, r.exitCode(), cmd);
        List<String> lines = r.err().lines().toList();
        assertEquals(1, lines.size(), cmd + " printed:\n" + r.err());
        String line = lines.get(0);
        assertTrue(line.startsWith("error: "), line);
        assertTrue(line.contains(expected), "'" + line + "' does not contain '" + expected + "'");
        assertFalse(line.contains("Exception"), line);
        assertFalse(r.out().contains("step 1/"), cmd + " started training");
    }

    @Test
    void unknownPreset() {
        assertOneLineError("unknown preset 'huge': use one of", "train", "--preset", "huge");
        assertOneLineError("unknown Llama preset 'gpt2-124m': use one of [tiny, small, bench-4x256, tinyllama-1.1b]",
                "train", "--model", "llama", "--preset", "gpt2-124m");
        assertOneLineError("unknown model 'bert': use --model gpt or --model llama", "train", "--model", "bert");
    }

    @Test
    void presetBesideModelConfigIsRefusedNotIgnored() throws IOException {
        Path config = Files.writeString(dir.resolve("config.json"),
                "{\"n_layer\": 2, \"n_embd\": 64, \"n_head\": 2, \"vocab_size\": 256, \"n_positions\": 64}");
        String both = "--preset small and --model-config " + config + " both give the model's shape: keep one";
        assertOneLineError(both, "train", "--preset", "small", "--model-config", config.toString());
        assertOneLineError(both, "plan", "--preset", "small", "--model-config", config.toString());
    }

    @Test
    void dataFileMissingEmptyOrTooShort() throws IOException {
        assertOneLineError("does not exist", "train", "--data", dir.resolve("missing.txt").toString());
        Path empty = Files.createFile(dir.resolve("empty.txt"));
        assertOneLineError("is empty", "train", "--data", empty.toString());
        Path shortFile = Files.writeString(dir.resolve("short.txt"), "hello world");
        assertOneLineError("use --seq-len 10 or less", "train", "--data", shortFile.toString(), "--seq-len", "64");
    }

    @Test
    void sequenceLongerThanThePresetsContext() {
        assertOneLineError("--seq-len 129 is longer than the tiny model's context of 128", "train", "--seq-len", "129");
    }

    @Test
    void nonPositiveCounts() {
        assertOneLineError("--steps must be at least 1, got 0", "train", "--steps", "0");
        assertOneLineError("--steps must be at least 1, got -3", "train", "--steps", "-3");
        assertOneLineError("--batch-size must be at least 1, got 0", "train", "--batch-size", "0");
        assertOneLineError("--seq-len must be at least 1", "train", "--seq-len", "0");
    }

    @Test
    void unknownDevice() {
        assertOneLineError("unknown device 'tpu': use --device auto, cpu, cuda", "train", "--device", "tpu");
    }

    @Test
    void gpuRanksWithoutAGpuSayWhy() {
        org.fsdp4j.cuda.CudaProbe.Result probe = org.fsdp4j.cuda.CudaProbe.probe();
        org.junit.jupiter.api.Assumptions.assumeFalse(probe.usable(), "a GPU is usable here");
        assertOneLineError("device cuda is not usable: " + probe.unavailableReason().orElseThrow(), "train", "--device",
                "cuda", "--world-size", "2");
    }

    @Test
    void unparsableFlags() {
        assertOneLineError("'abc' is not an int", "train", "--steps", "abc");
        assertOneLineError("Unknown option: '--bogus'", "train", "--bogus");
        assertOneLineError("missing command", new String[0]);
    }

    @Test
    void outputPathThatIsAFile() throws IOException {
        Path file = Files.writeString(dir.resolve("taken"), "x");
        assertOneLineError("is not a directory", "train", "--steps", "1", "--out", file.toString());
    }

    /**
     * An --out that cannot be written fails before the first step: a million steps would take
     * hours, so a generous bound on the time proves nothing ran (nor did "step 1/" print).
     */
    @Test
    void unwritableOutputFailsBeforeTheFirstStep() throws IOException {
        Path file = Files.writeString(dir.resolve("a-file"), "x");
        List<String[]> cases = new java.util.ArrayList<>(List.of(
                new String[] {"cannot create output directory", file.resolve("sub").toString()},
                new String[] {"--out is empty", ""}));
        if (Files.isDirectory(Path.of("/proc/self"))) {
            cases.add(new String[] {"cannot create output directory /proc/fsdp4j", "/proc/fsdp4j"});
        }
        Path readOnly = Files.createDirectory(dir.resolve("read-only"));
        if (readOnly.toFile().setWritable(false, false) && !Files.isWritable(readOnly)) {   // root writes anyway
            cases.add(new String[] {"pass --out a directory you can write", readOnly.resolve("run").toString()});
        }
        for (String[] c : cases) {
            long start = System.nanoTime();
            assertOneLineError(c[0], "train", "--steps", "1000000", "--device", "cpu", "--out", c[1]);
            double seconds = (System.nanoTime() - start) / 1e9;
            assertTrue(seconds < 10, "--out '" + c[1] + "' took " + seconds + " s to fail");
            assertOneLineError(c[0], "bench", "gemm", "--device", "cpu", "--sizes", "64", "--out", c[1]);
        }
        assertEquals(ExitCode.BAD_INPUT.code(), CliRunner.run("train", "--out", file.toString()).exitCode());
    }

    @Test
    void sizesThatOverflowAreRejectedWithTheirLimits() {
        assertOneLineError("--sizes must be between 1 and 23170, got 100000", "bench", "gemm", "--sizes", "100000");
        assertOneLineError("--warmup must be >= 0, got -1", "bench", "gemm", "--warmup", "-1", "--sizes", "64");
        assertOneLineError("--iters must be at least 1, got 0", "bench", "gemm", "--iters", "0", "--sizes", "64");
        assertOneLineError("tokens per step; at most 2147483647 are supported", "train", "--batch-size", "2000000000");
        assertOneLineError("one buffer of the step needs", "train", "--batch-size", "2000000", "--device", "cpu");
        assertOneLineError("--cpu-threads must be between 0 (all cores) and 32767, got 100000", "train",
                "--cpu-threads", "100000");
        assertOneLineError("--cpu-threads must be between 0 (all cores) and 32767", "bench", "gemm", "--cpu-threads",
                "40000");
    }

    @Test
    void divergenceAndOtherNewFlagsAreChecked() {
        assertOneLineError("unknown --on-nonfinite 'maybe': use stop or skip", "train", "--on-nonfinite", "maybe");
        assertOneLineError("--max-skipped-steps applies to --on-nonfinite skip only", "train", "--max-skipped-steps", "3");
        assertOneLineError("--max-skipped-steps must be at least 1", "train", "--on-nonfinite", "skip",
                "--max-skipped-steps", "0");
        assertOneLineError("'lots' is not a size", "train", "--memory-limit", "lots");
        assertOneLineError("--world-size does not apply: use --world-sizes 2", "bench", "sharding", "--world-size", "2");
    }
}
