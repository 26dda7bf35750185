// `fsdp4j train` end to end, in-process: the header, one line per step, the closing line with
// the gap to the floor, and summary.json with the fields other tools read.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Pattern;
import org.fsdp4j.data.MarkovSource;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.LlamaConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TrainCommandTest {

    private static final Pattern STEP_LINE = Pattern.compile(
            "step \\d+/3 \\| loss \\d+\\.\\d{4} \\| norm \\d+\\.\\d{4} \\| lr \\d\\.\\de-\\d\\d \\| \\d+\\.\\d ms"
                    + " \\| [\\d.]+[kM]? tok/s \\| mem [\\d.]+ (B|KiB|MiB|GiB) = params [\\d.]+ \\+ grads [\\d.]+"
                    + " \\+ optimizer [\\d.]+ \\+ activations [\\d.]+( \\+ workspace [\\d.]+)?");

    @TempDir
    Path dir;

    @Test
    void trainsPrintsAndWritesTheSummary() throws IOException {
        Path out = dir.resolve("run");
        CliRunner.Result r = CliRunner.run("train", "--steps", "3", "--batch-size", "2", "--seq-len", "16",
                "--device", "cpu", "--cpu-threads", "1", "--seed", String.valueOf(System.nanoTime()),
                "--out", out.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertEquals("", r.err());
        double floor = MarkovSource.standard().entropyRateNats();
        assertTrue(r.out().contains(String.format(java.util.Locale.ROOT, "loss floor %.4f nats", floor)), r.out());
        List<String> stepLines = r.out().lines().filter(l -> l.startsWith("step ")).toList();
        assertEquals(3, stepLines.size(), r.out());
        for (String line : stepLines) {
            assertTrue(STEP_LINE.matcher(line).matches(), "step line '" + line + "'");
        }
        assertTrue(r.out().lines().anyMatch(l -> l.startsWith("done: 3 steps") && l.contains("gap")), r.out());

        JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        long params = GptConfig.preset("tiny").parameterCount();
        assertEquals(params, s.get("params").asLong());
        assertEquals(1, s.get("world_size").asInt());
        assertEquals("cpu", s.get("device").asText());
        assertEquals(floor, s.get("loss_floor").asDouble(), 0.0);
        assertEquals(3, s.get("losses").size());
        assertEquals(s.get("losses").get(2).floatValue(), s.get("final_loss").floatValue());
        assertTrue(s.get("step_time_ms_median").asDouble() > 0);
        assertTrue(s.get("tokens_per_second").asDouble() > 0);
        assertArrayEquals(new long[] {16 * params}, longs(s.get("persistent_bytes_per_rank")));
        assertEquals(1, s.get("peak_bytes_per_rank").size());
        assertTrue(s.get("peak_bytes_per_rank").get(0).asLong() > 16 * params);
        assertEquals(4 * params, s.get("peak_bytes_by_category").get("params").get(0).asLong());
        long atPeak = 0;
        for (JsonNode perRank : s.get("bytes_at_peak_by_category")) {
            atPeak += perRank.get(0).asLong();
        }
        assertEquals(s.get("peak_bytes_per_rank").get(0).asLong(), atPeak, "the split at the peak sums to the peak");
        try (var files = Files.list(out)) {
            // the reports and the lock file stay (deleting it would race with a run about to lock it); no temporary file does
            assertEquals(java.util.Set.of(out.resolve("summary.json"), out.resolve(OutputDir.LOCK_FILE),
                    out.resolve(MetricsLog.FILE), out.resolve(RunCharts.LOSS_FILE), out.resolve(RunCharts.MEMORY_FILE)),
                    java.util.Set.copyOf(files.toList()), "no temporary file is left behind");
        }
    }

    @Test
    void trainsTheLlamaFamily() throws IOException {
        Path out = dir.resolve("llama");
        CliRunner.Result r = CliRunner.run("train", "--model", "llama", "--steps", "3", "--batch-size", "2", "--seq-len",
                "16", "--device", "cpu", "--cpu-threads", "1", "--out", out.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().lines().findFirst().orElse("").contains("llama preset tiny: 2 layers, 4 heads (2 key/value)"),
                r.out());
        assertEquals(3, r.out().lines().filter(l -> STEP_LINE.matcher(l).matches()).count(), r.out());
        JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        assertEquals("llama", s.get("model").asText());
        assertEquals("tiny", s.get("preset").asText());
        assertEquals(LlamaConfig.preset("tiny").parameterCount(), s.get("params").asLong());
        assertTrue(s.get("final_loss").asDouble() < s.get("losses").get(0).asDouble() + 0.5, s.toString());
    }

    private static long[] longs(JsonNode array) {
        long[] v = new long[array.size()];
        for (int i = 0; i < v.length; i++) {
            v[i] = array.get(i).asLong();
        }
        return v;
    }
}
