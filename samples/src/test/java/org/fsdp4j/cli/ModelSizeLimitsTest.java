// Model sizes past what fsdp4j takes, in train and in plan: each is one "error: " line naming the
// flag to lower (exit 1) within seconds, never a stack trace, a negative size, or a heap that
// grows for minutes. A shape within the limits but too large for a CPU tensor names --hidden; one
// the planner can count is planned, with no negative figure.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelSizeLimitsTest {

    /** A number printed with a minus sign in front ("-3.2 GiB", "=-12"): a size that overflowed. */
    private static final Pattern NEGATIVE = Pattern.compile("(^|[\\s(=:,])-\\d");

    @TempDir
    Path dir;

    /** One "error: " line containing {@code expected}, exit 1, within 10 s (generous: the machine may be busy). */
    private static void refused(String expected, String... args) {
        long start = System.nanoTime();
        CliRunner.Result r = CliRunner.run(args);
        double seconds = (System.nanoTime() - start) / 1e9;
        String cmd = String.join(" ", args);
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode(), cmd + ": " + r.err());
        List<String> lines = r.err().lines().toList();
        assertEquals(1, lines.size(), cmd + " printed:\n" + r.err());
        assertTrue(lines.get(0).startsWith("error: ") && lines.get(0).contains(expected),
                "'" + lines.get(0) + "' does not contain '" + expected + "'");
        assertFalse(r.out().contains("step 1/"), cmd + " started training");
        assertTrue(seconds < 10, cmd + " took " + seconds + " s to fail");
    }

    @Test
    void shapeFlagsPastTheirLimitsAreRefusedNamingTheFlag() {
        for (String command : new String[] {"train", "plan"}) {
            refused("--hidden must be between 1 and 1048576, got 2000000000", command, "--hidden", "2000000000");
            refused("--hidden must be between 1 and 1048576, got 2000000000", command, "--hidden", "2000000000",
                    "--heads", "10");
            refused("--vocab must be between 1 and 16777216, got 2000000000", command, "--vocab", "2000000000");
            refused("--context must be between 1 and 16777216, got 2000000000", command, "--context", "2000000000");
            refused("--hidden must be between 1 and 1048576, got 2000000000", command, "--model", "llama", "--hidden",
                    "2000000000");
        }
        refused("--hidden must be between 1 and 1048576, got 2000000000", "plan", "--params", "1e12", "--layers", "8",
                "--hidden", "2000000000");
    }

    /** Before the limit, a billion layers grew the heap for minutes: a child JVM with a small heap shows it does not. */
    @Test
    void aBillionLayersIsRefusedWithoutFillingTheHeap() throws Exception {
        for (List<String> args : List.of(List.of("train", "--layers", "2000000000", "--device", "cpu"),
                List.of("plan", "--layers", "2000000000"))) {
            ChildJvm child = ChildJvm.start(dir.resolve(args.get(0) + ".err"), Map.of(), List.of("-Xmx192m"), args);
            assertEquals(ExitCode.BAD_INPUT.code(), child.exit(60), child.stderr());
            assertEquals("error: --layers must be between 1 and 10000, got 2000000000", child.stderr().strip());
        }
    }

    @Test
    void totalsPastWhatALongCountsAreRefusedNamingTheFlags() {
        // each dimension within its limit, the product not
        refused("fsdp4j takes at most 2^48 (about 2.8e14); lower --layers or --hidden", "plan", "--hidden", "1048576",
                "--heads", "1", "--layers", "10000");
        refused("fsdp4j takes at most 2^48 (about 2.8e14); lower --layers or --hidden", "train", "--hidden", "1048576",
                "--heads", "1", "--layers", "10000", "--device", "cpu");
        refused("holds more activation values than fsdp4j counts (2^58, about 2.9e17): lower --seq-len or --batch-size",
                "plan", "--context", "16777216", "--seq-len", "16777216", "--layers", "10000", "--gpus", "1");
        refused("--micro-batches 1048576 all-gathers", "plan", "--hidden", "1048576", "--heads", "1", "--layers", "10",
                "--gpus", "1", "--micro-batches", "1048576", "--batch-size", "1048576");
        refused("--gpus 65536 × --nodes 32768 is 2147483648 GPUs; at most 2147483647 are supported", "plan", "--gpus",
                "65536", "--nodes", "32768");
    }

    /** 65536 wide with one head is a real (if huge) shape: the CPU cannot hold one of its blocks, a GPU plan can count it. */
    @Test
    void aWidthTooLargeForACpuTensorNamesHiddenAndIsStillPlanned() {
        refused("each block of this model (width 65536) holds 51,540,459,520 parameters (192.0 GiB in fp32), but a CPU"
                + " tensor holds at most 2 GiB and each unit of parameters is one: lower --hidden, or train on a GPU",
                "train", "--hidden", "65536", "--heads", "1", "--device", "cpu");
        for (String[] args : new String[][] {{"plan", "--hidden", "65536", "--heads", "1"},
            {"plan", "--hidden", "1048576", "--heads", "1", "--json"},
            {"plan", "--vocab", "16777216", "--context", "16777216", "--seq-len", "65536"}}) {
            CliRunner.Result r = CliRunner.run(args);
            assertEquals(0, r.exitCode(), String.join(" ", args) + ": " + r.err());
            assertFalse(NEGATIVE.matcher(r.out()).find(), String.join(" ", args) + " printed a negative figure:\n" + r.out());
        }
    }
}
