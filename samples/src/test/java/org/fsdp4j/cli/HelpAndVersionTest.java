// The command line's help and version: -V answers on every subcommand, help prints without
// picocli warnings, and each --out and --iters says what the command really writes and reports.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class HelpAndVersionTest {

    @Test
    void everyCommandAnswersMinusV() {
        for (String[] cmd : new String[][] {{"-V"}, {"train", "-V"}, {"bench", "-V"}, {"bench", "gemm", "-V"},
            {"bench", "step", "--version"}, {"bench", "sharding", "-V"}}) {
            CliRunner.Result r = CliRunner.run(cmd);
            assertEquals(0, r.exitCode(), String.join(" ", cmd));
            assertEquals(Main.VERSION, r.out().strip(), String.join(" ", cmd));
        }
    }

    @Test
    void helpPrintsNoWarningAndSaysWhatEachCommandWrites() {
        // picocli reports a format error in a description on System.err, not on the command's writer
        PrintStream saved = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        String bench;
        String step;
        String sharding;
        String gemm;
        try {
            System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
            bench = CliRunner.run("bench", "--help").out();
            step = CliRunner.run("bench", "step", "--help").out();
            sharding = CliRunner.run("bench", "sharding", "--help").out();
            gemm = CliRunner.run("bench", "gemm", "--help").out();
        } finally {
            System.setErr(saved);
        }
        assertFalse(captured.toString(StandardCharsets.UTF_8).contains("WARN"), captured.toString(StandardCharsets.UTF_8));
        assertTrue(bench.contains("(TFLOP/s, % of the device's peak)"), bench);
        assertTrue(step.replaceAll("\\s+", " ").contains("bench step: DIR/step.json"), step);
        assertTrue(sharding.replaceAll("\\s+", " ").contains("bench sharding: DIR/sharding.json"), sharding);
        assertTrue(gemm.replaceAll("\\s+", " ").contains("their mean reported"), gemm);
        assertFalse(gemm.contains("median"), gemm);
    }
}
