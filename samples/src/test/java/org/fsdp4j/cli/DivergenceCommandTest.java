// A run that diverges (a learning rate of 1e9) stops at the first non-finite step in fp32, bf16
// and fp16, says so in one line, exits 3 and leaves a valid summary.json that records where and
// why, with null (never "NaN") for the non-finite loss. --on-nonfinite skip skips a bounded
// number of such steps first.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DivergenceCommandTest {

    private static final int STEPS = 30;

    @TempDir
    Path dir;

    private record Run(CliRunner.Result result, JsonNode summary) {
    }

    private Run diverge(String name, String... extra) throws IOException {
        Path out = dir.resolve(name);
        List<String> args = new java.util.ArrayList<>(List.of("train", "--lr", "1e9", "--steps", String.valueOf(STEPS),
                "--batch-size", "4", "--seq-len", "16", "--device", "cpu", "--cpu-threads", "1",
                "--seed", String.valueOf(System.nanoTime()), "--out", out.toString()));
        args.addAll(List.of(extra));
        CliRunner.Result r = CliRunner.run(args.toArray(String[]::new));
        String text = Files.readString(out.resolve("summary.json"));
        assertFalse(text.contains("NaN") || text.contains("Infinity"), text);
        return new Run(r, new ObjectMapper().readTree(text));      // strict JSON: a bare NaN would not parse
    }

    /**
     * Exit 3, one line naming the step and what was not finite, and a summary that says the same:
     * the last loss is null when the loss itself was not finite (with these seeds the loss may
     * also stay finite, ~1e18, while the gradients overflow).
     */
    private static void assertDiverged(Run run) {
        CliRunner.Result r = run.result();
        assertEquals(ExitCode.DIVERGED.code(), r.exitCode(), r.err());
        List<String> err = r.err().lines().toList();
        assertEquals(1, err.size(), r.err());
        JsonNode s = run.summary();
        int at = s.get("diverged_at_step").asInt();
        assertTrue(err.get(0).startsWith("error: training diverged at step " + at + " of " + STEPS + ": "), err.get(0));
        String why = switch (s.get("divergence").asText()) {
            case "nonfinite_loss" -> "the loss is not finite";
            case "nonfinite_gradients" -> "the gradients are not finite (inf or NaN) although the loss is";
            case "loss_scale_floor" -> "the fp16 gradients overflowed at every loss scale";
            default -> throw new AssertionError(s.toString());
        };
        assertTrue(err.get(0).contains(why), err.get(0));
        assertTrue(err.get(0).contains("summary: "), err.get(0));
        assertTrue(at >= 2 && at < STEPS, "step 1 runs at a finite loss; the run stops early: " + at);
        assertEquals(at, s.get("steps").asInt());
        assertEquals(at, s.get("losses").size());
        assertTrue(s.get("losses").get(0).isNumber(), s.toString());
        boolean lossNonFinite = !s.get("divergence").asText().equals("nonfinite_gradients");
        assertEquals(lossNonFinite, s.get("losses").get(at - 1).isNull(), s.toString());
        assertEquals(lossNonFinite, s.get("final_loss").isNull(), s.toString());
        assertEquals(STEPS, s.get("planned_steps").asInt());
        assertTrue(s.get("skipped_steps").asInt() >= 1, s.toString());
        assertFalse(s.get("interrupted").asBoolean());
        assertEquals(at, r.out().lines().filter(l -> l.startsWith("step ")).count(), r.out());
    }

    @Test
    void fp32AndBf16StopAtTheFirstNonFiniteLoss() throws IOException {
        for (String dtype : new String[] {"fp32", "bf16"}) {
            Run run = diverge(dtype, "--param-dtype", dtype);
            assertDiverged(run);
            assertTrue(run.summary().get("divergence").asText().startsWith("nonfinite_"), run.summary().toString());
        }
    }

    @Test
    void fp16SaysWhatOverflowedAndEndsTheSameWay() throws IOException {
        Run run = diverge("fp16", "--param-dtype", "fp16", "--reduce-dtype", "fp16", "--world-size", "2");
        assertDiverged(run);
        String divergence = run.summary().get("divergence").asText();
        // fp16 gradient overflow with a finite loss is the scaler's business, never nonfinite_gradients
        assertTrue(divergence.equals("nonfinite_loss") || divergence.equals("loss_scale_floor"), divergence);
        for (String line : run.result().out().lines().filter(l -> l.contains("skipped:")).toList()) {
            assertTrue(line.contains("skipped: the loss is not finite") || line.contains("skipped: gradients overflowed fp16"),
                    line);
        }
    }

    @Test
    void skipSkipsABoundedNumberOfNonFiniteStepsThenStops() throws IOException {
        Run run = diverge("skip", "--on-nonfinite", "skip", "--max-skipped-steps", "3");
        assertDiverged(run);
        assertTrue(run.result().err().contains("after skipping 3 such steps"), run.result().err());
        List<String> skipped = run.result().out().lines().filter(l -> l.startsWith("step ") && l.contains("skipped:"))
                .toList();
        // three non-finite steps are skipped and the fourth ends the run, whatever finite steps (huge,
        // at this learning rate) come between them; the skipped updates leave the parameters as they are
        assertEquals(4, skipped.size(), run.result().out());
        int fourth = Integer.parseInt(skipped.get(3).substring("step ".length(), skipped.get(3).indexOf('/')));
        assertEquals(fourth, run.summary().get("diverged_at_step").asInt(), run.result().out());
        assertEquals(4, run.summary().get("skipped_steps").asInt());
    }
}
