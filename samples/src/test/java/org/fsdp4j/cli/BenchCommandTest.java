// The benchmark programs run end to end on small sizes and write their JSON; the GEMM's
// built-in fp64 check must come out at fp32 rounding level, and the CPU (no known peak) says so.
// bench step and bench sharding run in one process: started as one of several (fsdp4j launch's or
// torchrun's variables) they refuse in one line instead of each process running the whole thing.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;
import org.fsdp4j.metrics.Flops;
import org.fsdp4j.model.GptConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BenchCommandTest {

    @TempDir
    Path dir;

    @Test
    void gemmTableAndJson() throws IOException {
        CliRunner.Result r = CliRunner.run("bench", "gemm", "--device", "cpu", "--sizes", "32,96", "--warmup", "1",
                "--iters", "2", "--cpu-threads", "1", "--out", dir.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("time(us)") && r.out().contains("TFLOP/s") && r.out().contains("%peak"), r.out());
        assertTrue(r.out().contains("peak unknown"), r.out());
        JsonNode results = new ObjectMapper().readTree(dir.resolve("gemm.json").toFile()).get("results");
        assertEquals(2, results.size());
        assertEquals(96, results.get(1).get("k").asInt());
        for (JsonNode row : results) {
            assertTrue(row.get("tflops").asDouble() > 0, row.toString());
            // |c - ref| / Σ|a·b|: fp32 accumulation over k ≤ 96 terms stays far below 1e-5.
            assertTrue(row.get("max_rel_error").asDouble() < 1e-5, row.toString());
            assertEquals(0, row.get("wrong").asInt(), row.toString());
            assertTrue(row.get("peak_tflops").isNull() && row.get("percent_of_peak").isNull(), row.toString());
        }
    }

    @Test
    void stepBenchmarkReportsThroughput() throws IOException {
        CliRunner.Result r = CliRunner.run("bench", "step", "--device", "cpu", "--preset", "tiny", "--batch-size", "2",
                "--seq-len", "16", "--steps", "2", "--warmup", "1", "--cpu-threads", "1", "--out", dir.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertEquals(3, r.out().lines().filter(l -> l.startsWith("step ")).count(), r.out());
        JsonNode s = new ObjectMapper().readTree(dir.resolve("step.json").toFile());
        assertEquals(2, s.get("step_times_ms").size());
        GptConfig tiny = GptConfig.preset("tiny");
        double gflop = Flops.trainingStep(tiny, tiny.parameterCount(), 2, 16) / 1e9;
        assertEquals(gflop, s.get("gflop_per_step").asDouble(), 1e-12);
        double medianMs = s.get("step_time_ms_median").asDouble();
        assertEquals(2 * 16 / (medianMs / 1e3), s.get("tokens_per_second").asDouble(), 1e-6);
        assertEquals(gflop / (medianMs / 1e3), s.get("achieved_gflops").asDouble(), 1e-9);
        // the CPU backend knows no peak: MFU is reported as unknown, not invented
        assertTrue(s.get("mfu").isNull(), s.toString());
        assertTrue(r.out().contains("MFU n/a"), r.out());
    }

    @Test
    void stepAndShardingRefuseToRunAsOneOfSeveralProcesses() {
        Map<String, String> launched = Map.of("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2",
                "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "29500");
        for (String command : new String[] {"bench step", "bench sharding"}) {
            UserError e = assertThrows(UserError.class, () -> DistOptions.requireAlone(command, launched));
            assertEquals(ExitCode.USAGE, e.exitCode());
            assertTrue(e.getMessage().startsWith(command + " runs in one process") && e.getMessage().contains("process 1 of 2")
                    && e.getMessage().contains("-- train --steps N"), e.getMessage());
            DistOptions.requireAlone(command, Map.of());   // alone: no error
        }
    }
}
