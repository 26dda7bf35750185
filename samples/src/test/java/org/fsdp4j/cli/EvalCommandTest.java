// `fsdp4j train --eval-every K` end to end: the validation loss falls on the embedded data and is
// shown where the training loss is (the step line, metrics.jsonl's val_loss on those steps only,
// summary.json, loss.png), and a 2-process run started by `fsdp4j launch` measures the same
// values as the in-process run of the same world size. A bad flag is one line naming it.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class EvalCommandTest {

    /** 30 steps of the tiny model on short sequences at two ranks, the validation loss every 5 steps over 2 batches. */
    private static final List<String> RUN = List.of("train", "--device", "cpu", "--preset", "tiny", "--batch-size", "8",
            "--seq-len", "32", "--cpu-threads", "2", "--collective-timeout", "30", "--steps", "30", "--lr", "3e-3",
            "--world-size", "2", "--eval-every", "5", "--eval-batches", "2");

    @TempDir
    Path dir;

    /** metrics.jsonl's val_loss by step, after checking that only the steps K divides have one. */
    private static Map<Integer, Float> valLosses(Path out) throws IOException {
        Map<Integer, Float> val = new LinkedHashMap<>();
        ObjectMapper json = new ObjectMapper();
        List<String> lines = Files.readAllLines(out.resolve(MetricsLog.FILE));
        assertEquals(30, lines.size());
        for (String line : lines) {
            JsonNode step = json.readTree(line);
            int s = step.get("step").asInt();
            assertEquals(s % 5 == 0, step.has("val_loss"), line);
            if (step.has("val_loss")) {
                val.put(s, (float) step.get("val_loss").asDouble());
            }
        }
        return val;
    }

    @Test
    void fallsAndIsTheSameOverTwoProcessesAsInOne() throws Exception {
        Path inProcess = dir.resolve("in-process");
        CliRunner.Result local = CliRunner.run(MultiProcessCommandTest.args(RUN, "--out", inProcess.toString())
                .toArray(String[]::new));
        assertEquals(0, local.exitCode(), local.err());
        Map<Integer, Float> expected = valLosses(inProcess);
        assertEquals(List.of(5, 10, 15, 20, 25, 30), new ArrayList<>(expected.keySet()));
        List<Float> values = new ArrayList<>(expected.values());
        for (int i = 1; i < values.size(); i++) {
            assertTrue(values.get(i) < values.get(i - 1), "the validation loss does not fall: " + expected);
        }
        assertTrue(values.get(values.size() - 1) < values.get(0) - 0.5, "the validation loss does not fall: " + expected);
        for (String line : local.out().split("\n")) {
            if (line.startsWith("step ")) {
                int step = Integer.parseInt(line.substring(5, line.indexOf('/')));
                assertEquals(expected.containsKey(step), line.contains(" | val "), line);
                if (expected.containsKey(step)) {
                    assertTrue(line.contains(String.format(java.util.Locale.ROOT, " | val %.4f | ", expected.get(step))), line);
                }
            }
        }
        assertTrue(local.out().contains("validation: a separate"), "the header names the held-out data: " + local.out());
        JsonNode summary = new ObjectMapper().readTree(inProcess.resolve("summary.json").toFile());
        assertEquals(values.get(values.size() - 1), (float) summary.get("final_val_loss").asDouble(), 0f);
        assertEquals(6, summary.get("val_losses").size());
        assertEquals(30, summary.get("val_losses").get(5).get("step").asInt());
        assertTrue(Files.size(inProcess.resolve(RunCharts.LOSS_FILE)) > 0);

        Path launched = dir.resolve("launched");
        ChildJvm launcher = ChildJvm.start(dir.resolve("launch.err"), Map.of(), MultiProcessCommandTest.args(List.of("launch",
                "--standalone", "--nproc-per-node", "2", "--"), MultiProcessCommandTest.args(RUN, "--out", launched.toString())
                .toArray(String[]::new)));
        assertEquals(0, launcher.exit(180), launcher.stderr());
        assertEquals(expected, valLosses(launched), "fsdp4j launch, 2 processes x 1 rank, vs 2 ranks in one process");
    }

    @Test
    void withoutTheFlagNoValidationLossAnywhere() throws Exception {
        Path out = dir.resolve("plain");
        CliRunner.Result r = CliRunner.run("train", "--device", "cpu", "--preset", "tiny", "--batch-size", "4", "--seq-len",
                "16", "--steps", "2", "--out", out.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertFalse(Files.readString(out.resolve(MetricsLog.FILE)).contains("val_loss"));
        assertFalse(Files.readString(out.resolve("summary.json")).contains("val_loss"));
        assertFalse(r.out().contains(" | val "), r.out());
    }

    @Test
    void aBadFlagIsOneLineNamingIt() {
        CliRunner.Result r = CliRunner.run("train", "--device", "cpu", "--preset", "tiny", "--steps", "2",
                "--eval-batches", "3");
        assertEquals(ExitCode.BAD_INPUT.code(), r.exitCode(), r.err());
        assertEquals("error: --eval-batches 3 needs --eval-every K: the validation loss is measured only every K steps",
                r.err().strip());
    }
}
