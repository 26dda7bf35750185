// Prefetch overlaps communication with compute for real: with a communicator that adds a fixed
// latency to every call, and units that each take a fixed extra compute time (a sleep queued on
// the compute stream, so the comparison does not depend on how busy the machine's cores are), a
// step that prefetches the next unit's all-gather is faster than one that gathers on demand.
// Only the ordering is asserted; the times are printed for the record.
package org.fsdp4j.fsdp;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.LatencyCommunicator;
import org.fsdp4j.model.GptModel;
import org.junit.jupiter.api.Test;

class FsdpOverlapTest {

    private static final Duration LATENCY = Duration.ofMillis(15);
    private static final long UNIT_COMPUTE_MS = 15;
    private static final int TIMED_STEPS = 3;

    private final FsdpTestSupport t = new FsdpTestSupport();

    private LocalFsdpGroup group(int prefetch) {
        FsdpOptions c = FsdpTestSupport.config(2, ShardingStrategy.FULL_SHARD).toBuilder().prefetch(prefetch).build();
        UnaryOperator<Communicator> link = w -> new LatencyCommunicator(w, LATENCY);
        return new LocalFsdpGroup(c, ctx -> new HookedModel(new GptModel(FsdpTestSupport.TINY, ctx.ops(), false), (hook, unit, after) -> {
            if (after && (hook.equals("preForward") || hook.equals("preBackward"))) {
                // the unit's compute, which a prefetched all-gather overlaps: work on the compute stream
                ((Backend) ctx.ops()).computeStream().launchHostFunc(() -> sleep(UNIT_COMPUTE_MS));
            }
        }), FsdpTestSupport.SGD, t.seed, org.fsdp4j.api.Device.CPU, FsdpTestSupport.RANK_BACKEND, link);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private double stepMs(LocalFsdpGroup g, int step) {
        long t0 = System.nanoTime();
        g.step(FsdpTestSupport.batch(t.tokens[step], t.targets[step]), 0.1f);
        return (System.nanoTime() - t0) / 1e6;
    }

    @Test
    void prefetchHidesCommunicationLatency() {
        double[] off = new double[TIMED_STEPS];
        double[] on = new double[TIMED_STEPS];
        try (LocalFsdpGroup noPrefetch = group(0); LocalFsdpGroup prefetch = group(1)) {
            stepMs(noPrefetch, 0);
            stepMs(prefetch, 0);
            for (int i = 0; i < TIMED_STEPS; i++) {      // interleaved, so load from other processes hits both
                off[i] = stepMs(noPrefetch, i + 1);
                on[i] = stepMs(prefetch, i + 1);
            }
        }
        double offMs = Arrays.stream(off).min().orElseThrow();
        double onMs = Arrays.stream(on).min().orElseThrow();
        // root twice in forward, blocks in both passes; with prefetch the last block stays gathered into its backward
        int gathers = 2 + 2 * FsdpTestSupport.TINY.numLayers();
        System.out.printf("overlap (N=2 FULL_SHARD, %d all-gathers per step (%d with prefetch), %d ms latency per call, "
                        + "%d ms compute per unit pass): prefetch off %.1f ms, prefetch 1 %.1f ms (best of %d)%n", gathers,
                gathers - 1, LATENCY.toMillis(), UNIT_COMPUTE_MS, offMs, onMs, TIMED_STEPS);
        assertTrue(onMs < offMs, "prefetch must be faster: " + onMs + " ms vs " + offMs + " ms without");
    }
}
