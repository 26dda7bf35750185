// `fsdp4j train` with the sharding flags: the header names the strategy and policy, step lines
// show the bytes communicated, summary.json carries the sharding fields, and bad sharding
// input ends with one clear line.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShardedTrainCommandTest {

    @TempDir
    Path dir;

    @Test
    void trainsShardedAndWritesTheShardingFields() throws IOException {
        Path out = dir.resolve("run");
        CliRunner.Result r = CliRunner.run("train", "--steps", "2", "--batch-size", "4", "--seq-len", "16",
                "--device", "cpu", "--cpu-threads", "2", "--world-size", "4", "--strategy", "hybrid_shard",
                "--shard-group-size", "2", "--param-dtype", "bf16", "--reduce-dtype", "fp32", "--prefetch", "2",
                "--micro-batches", "1", "--checkpoint-activations", "--offload", "--max-grad-norm", "0.5",
                "--out", out.toString());
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("sharding hybrid_shard over 4 ranks (shard groups of 2) | param bf16, reduce fp32, "
                + "master fp32 | prefetch 2 | micro-batches 1 | offload to host"), r.out());
        // the tiny preset's blocks outweigh its root, so the root's gradient is reduced in two parts
        assertTrue(r.out().contains("unit buffers root_grad_split: gathered params + unsharded grads peak at "), r.out());
        List<String> steps = r.out().lines().filter(l -> l.startsWith("step ")).toList();
        assertEquals(2, steps.size(), r.out());
        assertTrue(steps.get(0).contains("| comm "), steps.get(0));

        JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        assertEquals("hybrid_shard", s.get("strategy").asText());
        assertEquals("bf16", s.get("param_dtype").asText());
        assertEquals("fp32", s.get("reduce_dtype").asText());
        assertEquals(4, s.get("world_size").asInt());
        assertEquals(4, s.get("comm_bytes_per_rank").size());
        assertTrue(s.get("comm_bytes_per_rank").get(0).asLong() > 0);
        long padded = s.get("padded_params").asLong();
        assertTrue(padded >= s.get("params").asLong());
        // offload: fp32 master, gradient shard, m and v of a shard (S = 2) on the host
        assertEquals(16 * padded / 2, s.get("host_persistent_bytes_per_rank").get(0).asLong());
        assertEquals(4, s.get("peak_bytes_by_category").get("gathered").size());
        assertEquals("root_grad_split", s.get("unit_buffer_schedule").asText());
        assertTrue(s.get("unit_buffer_budget_bytes").asLong() > 0);
    }

    @Test
    void badShardingInputGetsOneLine() {
        String[][] cases = {
            {"world size must be >= 1, got 0", "--world-size", "0"},
            {"shard group size 3 does not divide world size 4: use one of 1, 2, 4", "--world-size", "4",
                "--strategy", "hybrid_shard", "--shard-group-size", "3"},
            {"unknown strategy 'zero3': use one of full_shard", "--strategy", "zero3"},
            {"unknown dtype 'fp8': use one of fp32, bf16, fp16", "--param-dtype", "fp8"},
            {"unknown dtype 'int8'", "--reduce-dtype", "int8"},
            {"--micro-batches 5 is more than the 4 samples each of the 2 ranks gets from batch size 8", "--world-size", "2",
                "--batch-size", "8", "--micro-batches", "5"},
            {"prefetch depth must be >= 0", "--prefetch", "-1"},
        };
        for (String[] c : cases) {
            String[] args = new String[c.length];
            args[0] = "train";
            System.arraycopy(c, 1, args, 1, c.length - 1);
            CliRunner.Result r = CliRunner.run(args);
            List<String> lines = r.err().lines().toList();
            assertEquals(1, lines.size(), String.join(" ", args) + ":\n" + r.err());
            assertTrue(lines.get(0).startsWith("error: ") && lines.get(0).contains(c[0]), lines.get(0));
            assertTrue(r.exitCode() != 0 && !r.out().contains("step 1/"));
        }
    }
}
