// Failures end a step everywhere, promptly and legibly: a rank that throws mid-step, or one
// that stalls past the collective timeout, makes every rank stop with an error naming it, and
// no thread is left running. Bad configuration gets one clear line each.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.TINY;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.comm.LocalLauncher.RanksFailedException;
import org.fsdp4j.model.GptModel;
import org.junit.jupiter.api.Test;

class FsdpFaultsTest {

    private final FsdpTestSupport t = new FsdpTestSupport();

    private RanksFailedException failingRun(int failedRank, Duration timeout, Runnable fault) {
        FsdpOptions c = FsdpTestSupport.config(4, ShardingStrategy.FULL_SHARD).toBuilder().collectiveTimeout(timeout).build();
        int[] forwards = new int[1];
        // rank failedRank misbehaves on its second step, just before the forward of unit h.1
        LocalFsdpGroup g = new LocalFsdpGroup(c, ctx -> new HookedModel(new GptModel(TINY, ctx.ops(), false), (hook, unit, after) -> {
            if (after) {
                return;
            }
            if (ctx.rank() == failedRank && hook.equals("preForward") && unit.index() == 1) {   // once per forward
                forwards[0]++;
            }
            if (ctx.rank() == failedRank && forwards[0] == 2 && hook.equals("preForward") && unit.index() == 2) {
                fault.run();
            }
        }), FsdpTestSupport.SGD, t.seed, org.fsdp4j.api.Device.CPU, FsdpTestSupport.RANK_BACKEND, UnaryOperator.identity());
        try {
            g.step(FsdpTestSupport.batch(t.tokens[0], t.targets[0]), 0.1f);
            return assertThrows(RanksFailedException.class, () -> g.step(FsdpTestSupport.batch(t.tokens[1], t.targets[1]), 0.1f));
        } finally {
            g.close();
        }
    }

    private static List<String> liveThreads() throws InterruptedException {
        List<String> names = new ArrayList<>();
        for (int attempt = 0; attempt < 50; attempt++) {
            names.clear();
            for (Thread th : Thread.getAllStackTraces().keySet()) {
                if (th.isAlive() && th.getName().startsWith("fsdp4j-")) {
                    names.add(th.getName());
                }
            }
            if (names.isEmpty()) {
                break;
            }
            Thread.sleep(20);
        }
        return names;
    }

    @Test
    void aRankThatThrowsMidStepStopsEveryRankWithItsName() throws InterruptedException {
        long t0 = System.nanoTime();
        RanksFailedException e = failingRun(2, Duration.ofSeconds(30), () -> {
            throw new IllegalStateException("injected fault in h.1");
        });
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
        assertEquals(2, e.firstFailedRank());
        assertTrue(e.getMessage().startsWith("rank 2 failed: IllegalStateException: injected fault in h.1"), e.getMessage());
        for (int r = 0; r < 4; r++) {
            assertTrue(e.failures().get(r) != null, "rank " + r + " must end with an error");
            if (r != 2) {
                assertTrue(e.failures().get(r).getMessage().contains("rank 2 failed"), e.failures().get(r).getMessage());
            }
        }
        assertTrue(elapsedMs < 10_000, "abort must be prompt, well within the 30 s timeout; took " + elapsedMs + " ms");
        assertEquals(List.of(), liveThreads());
    }

    @Test
    void aRankThatStallsPastTheTimeoutIsNamedByTheOthers() throws InterruptedException {
        RanksFailedException e = failingRun(1, Duration.ofMillis(500), () -> {
            try {
                Thread.sleep(1500);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        });
        for (int r = 0; r < 4; r++) {
            String m = String.valueOf(e.failures().get(r).getMessage());
            assertTrue(m.contains("rank 1 did not arrive within 500 ms") || r == 1, "rank " + r + ": " + m);
        }
        assertEquals(List.of(), liveThreads());
    }

    @Test
    void badConfigurationGetsOneClearLineEach() {
        assertEquals("world size must be >= 1, got 0",
                assertThrows(IllegalArgumentException.class, () -> FsdpOptions.builder().worldSize(0).build()).getMessage());
        assertEquals("shard group size 3 does not divide world size 4: use one of 1, 2, 4",
                assertThrows(IllegalArgumentException.class,
                        () -> FsdpOptions.builder().worldSize(4).hybridShard(3).build()).getMessage());
        assertEquals("hybrid_shard needs --shard-group-size S, a divisor of the world size 4",
                assertThrows(IllegalArgumentException.class,
                        () -> FsdpOptions.builder().worldSize(4).hybridShard(0).build()).getMessage());
        assertEquals("unknown strategy 'zero3': use one of full_shard, shard_grad_op, optimizer_only, no_shard, hybrid_shard",
                assertThrows(IllegalArgumentException.class, () -> ShardingStrategy.parse("zero3")).getMessage());
        assertEquals("unknown dtype 'fp8': use one of fp32, bf16, fp16",
                assertThrows(IllegalArgumentException.class, () -> MixedPrecisionPolicy.parse("fp8", "fp32")).getMessage());
        assertEquals("--micro-batches 4 is more than the 3 samples each of the 2 ranks gets from batch size 6: "
                        + "use at most 3 micro-batches or a larger batch",
                assertThrows(IllegalArgumentException.class,
                        () -> FsdpOptions.builder().worldSize(2).microBatches(4).build().checkBatch(6)).getMessage());
        assertEquals("batch size 6 does not split over 4 ranks: use a multiple of 4",
                assertThrows(IllegalArgumentException.class, () -> FsdpOptions.builder().worldSize(4).build().checkBatch(6)).getMessage());
        assertEquals(ShardingStrategy.SHARD_GRAD_OP, ShardingStrategy.parse("shard-grad-op"));
    }
}
