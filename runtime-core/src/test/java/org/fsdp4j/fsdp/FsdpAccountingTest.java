// The memory model and the communication volume, each checked against numbers this test
// derives itself from the model's parameter shapes (not from the engine's layout):
//   persistent bytes per rank, fp32 FULL_SHARD with AdamW = 16·P′/N exactly;
//   peak bytes per category within the bound DESIGN.md states, and falling as N grows;
//   bytes sent per step per rank = (S−1)/S of each gathered or reduced unit, per pass.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.BATCH;
import static org.fsdp4j.fsdp.FsdpTestSupport.SEQ;
import static org.fsdp4j.fsdp.FsdpTestSupport.TINY;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.fsdp4j.comm.CommBytes;
import org.fsdp4j.comm.CommOp;
import org.fsdp4j.model.GptModel;
import org.fsdp4j.model.ParamSpec;
import org.fsdp4j.model.Unit;
import org.fsdp4j.optim.AdamW;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.junit.jupiter.api.Test;

class FsdpAccountingTest {

    private final FsdpTestSupport t = new FsdpTestSupport();

    /** Unit sizes of TINY, computed here: each parameter start rounded up to 16 bytes, the end to a multiple of n. */
    private static long[] paddedUnitNumel(int n, int dtypeBytes) {
        List<Unit> units;
        try (var b = FsdpTestSupport.cpu("shapes"); GptModel m = new GptModel(TINY, b, false)) {
            units = m.units();
        }
        long[] out = new long[units.size()];
        int align = 16 / dtypeBytes;
        for (int u = 0; u < units.size(); u++) {
            long end = 0;
            for (ParamSpec p : units.get(u).params()) {
                end = (end + align - 1) / align * align + p.numel();
            }
            out[u] = (end + n - 1) / n * n;
        }
        return out;
    }

    private LocalFsdpGroup group(FsdpConfig c) {
        return new LocalFsdpGroup(c, (r, b) -> new GptModel(TINY, b, false), new AdamW(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f),
                t.seed, BATCH, SEQ, 1, UnaryOperator.identity());
    }

    @Test
    void persistentBytesAre16PPrimeOverNAndPeakFallsWithN() {
        System.out.println("fp32 FULL_SHARD + AdamW, model vocab 37 ctx 8 L2 C10, batch 24x8 (bytes per rank):");
        System.out.printf("%3s %6s %10s %10s %10s %10s %10s %10s %10s%n", "N", "P'", "persistent", "peak",
                "params", "grads", "optimizer", "gathered", "activations");
        long previousPeak = Long.MAX_VALUE;
        for (int n : new int[] {1, 2, 4, 8}) {
            long[] unitNumel = paddedUnitNumel(n, 4);
            long pPrime = 0;
            long maxBlock = 0;
            for (int u = 0; u < unitNumel.length; u++) {
                pPrime += unitNumel[u];
                maxBlock = u == 0 ? maxBlock : Math.max(maxBlock, unitNumel[u]);
            }
            long expectedPersistent = 16 * pPrime / n;
            try (LocalFsdpGroup g = group(FsdpTestSupport.config(n, ShardingStrategy.FULL_SHARD))) {
                for (MemoryTracker m : g.deviceMemory()) {
                    assertEquals(expectedPersistent, m.persistentBytes(), "after construction, N=" + n);
                }
                g.deviceMemory().forEach(MemoryTracker::resetPeak);
                for (int s = 0; s < 2; s++) {
                    g.step(t.tokens[s], t.targets[s], 1e-3f);
                }
                long worstPeak = 0;
                for (MemoryTracker m : g.deviceMemory()) {
                    assertEquals(expectedPersistent, m.persistentBytes(), "after steps, N=" + n);
                    assertEquals(expectedPersistent, m.liveBytes() - m.liveBytes(MemoryCategory.ACTIVATIONS),
                            "nothing but persistent state and the micro-batch tokens outlives a step, N=" + n);
                    // DESIGN.md's bound: the root stays gathered, plus at most two blocks (the running
                    // one and its prefetch); unsharded gradients of the root and of at most two blocks
                    // (one being written, one being reduced); activations are the model's, unsharded.
                    long gatheredBound = n == 1 ? 0 : 4 * (unitNumel[0] + 2 * maxBlock);
                    long gradBound = 16 * pPrime / n / 4 + (n == 1 ? 0 : 4 * (unitNumel[0] + 2 * maxBlock));
                    assertTrue(m.peakBytes(MemoryCategory.GATHERED) <= gatheredBound,
                            "gathered peak " + m.peakBytes(MemoryCategory.GATHERED) + " > " + gatheredBound);
                    assertTrue(m.peakBytes(MemoryCategory.GRADS) <= gradBound,
                            "grads peak " + m.peakBytes(MemoryCategory.GRADS) + " > " + gradBound);
                    long bound = expectedPersistent - 4 * pPrime / n + gradBound + gatheredBound
                            + m.peakBytes(MemoryCategory.ACTIVATIONS) + m.peakBytes(MemoryCategory.WORKSPACE);
                    assertTrue(m.peakBytes() <= bound, "peak " + m.peakBytes() + " > bound " + bound + ", N=" + n);
                    worstPeak = Math.max(worstPeak, m.peakBytes());
                }
                MemoryTracker m0 = g.deviceMemory().get(0);
                System.out.printf("%3d %6d %10d %10d %10d %10d %10d %10d %10d%n", n, pPrime, m0.persistentBytes(),
                        worstPeak, m0.peakBytes(MemoryCategory.PARAMS), m0.peakBytes(MemoryCategory.GRADS),
                        m0.peakBytes(MemoryCategory.OPTIMIZER), m0.peakBytes(MemoryCategory.GATHERED),
                        m0.peakBytes(MemoryCategory.ACTIVATIONS));
                assertTrue(worstPeak < previousPeak, "peak per rank must fall with N: " + worstPeak + " at N=" + n
                        + " vs " + previousPeak + " before");
                previousPeak = worstPeak;
            }
        }
    }

    @Test
    void gradientAccumulationKeepsEveryUnshardedGradientAndSaysSo() {
        int n = 2;
        long pPrime = 0;
        for (long u : paddedUnitNumel(n, 4)) {
            pPrime += u;
        }
        try (LocalFsdpGroup g = group(FsdpTestSupport.config(n, ShardingStrategy.FULL_SHARD).withMicroBatches(3))) {
            g.deviceMemory().forEach(MemoryTracker::resetPeak);
            g.step(t.tokens[0], t.targets[0], 1e-3f);
            for (MemoryTracker m : g.deviceMemory()) {
                // No reduce-scatter before the last micro-batch: from the first backward on, every
                // unit's whole fp32 gradient is held next to the gradient shard.
                assertEquals(4 * pPrime / n + 4 * pPrime, m.peakBytes(MemoryCategory.GRADS));
            }
        }
    }

    @Test
    void offloadMovesMasterGradsAndOptimizerStateToTheHostTracker() {
        int n = 2;
        long pPrime = 0;
        for (long u : paddedUnitNumel(n, 4)) {
            pPrime += u;
        }
        try (LocalFsdpGroup g = group(FsdpTestSupport.config(n, ShardingStrategy.FULL_SHARD).withOffload(true))) {
            g.step(t.tokens[0], t.targets[0], 1e-3f);
            for (int r = 0; r < n; r++) {
                assertEquals(16 * pPrime / n, g.hostMemory().get(r).persistentBytes());
                // the device keeps only the fp32 all-gather input shard
                assertEquals(4 * pPrime / n, g.deviceMemory().get(r).persistentBytes());
            }
        }
    }

    /** Expected bytes this rank sends per step: computed from the unit sizes and the strategy. */
    private static long[] expectedSentPerStep(FsdpConfig c, int layers) {
        int n = c.worldSize();
        int s = c.shardSize();
        int r = c.replicateSize();
        int p = c.precision().paramDtype().byteSize();
        int red = c.precision().reduceDtype().byteSize();
        long[] units = paddedUnitNumel(s, p);
        long ag = 0;
        long rs = 0;
        long ar = 2L * (n - 1) * 8 / n;                 // (loss, Σ grad²) in fp32
        for (int u = 0; u < units.length; u++) {
            long shard = units[u] / s;
            boolean block = u > 0;
            switch (c.strategy()) {
                case FULL_SHARD:
                case HYBRID_SHARD:
                    ag += (long) c.microBatches() * (block ? 2 : 1) * (s - 1) * shard * p;   // forward, and backward again
                    rs += (s - 1) * shard * red;
                    ar += r > 1 ? 2L * (r - 1) * shard * red / r : 0;
                    break;
                case SHARD_GRAD_OP:
                    ag += (long) c.microBatches() * (s - 1) * shard * p;
                    rs += (s - 1) * shard * red;
                    break;
                case OPTIMIZER_ONLY:
                    ar += 2L * (n - 1) * units[u] * red / n;
                    ag += (s - 1) * shard * p;                                              // updated params
                    break;
                case NO_SHARD:
                    ar += 2L * (n - 1) * units[u] * red / n;
                    break;
                default:
                    throw new AssertionError(c.strategy());
            }
        }
        assertEquals(layers + 1, units.length);
        return new long[] {ag, rs, ar};
    }

    @Test
    void communicationPerStepMatchesTheLayoutFormula() {
        List<FsdpConfig> configs = new ArrayList<>();
        for (ShardingStrategy s : ShardingStrategy.values()) {
            configs.add(FsdpTestSupport.config(4, s));
        }
        configs.add(FsdpTestSupport.config(3, ShardingStrategy.FULL_SHARD).withMicroBatches(2)
                .withPrecision(new MixedPrecisionPolicy(DType.BF16, DType.BF16)));
        configs.add(FsdpTestSupport.config(8, ShardingStrategy.HYBRID_SHARD)
                .withPrecision(new MixedPrecisionPolicy(DType.BF16, DType.F32)));
        System.out.println("bytes sent per step per rank (received is equal):");
        for (FsdpConfig c : configs) {
            long[] expected = expectedSentPerStep(c, TINY.numLayers());
            try (LocalFsdpGroup g = group(c)) {
                for (int s = 0; s < 2; s++) {
                    List<FsdpStepResult> res = g.step(t.tokens[s], t.targets[s], 1e-3f);
                    for (int r = 0; r < c.worldSize(); r++) {
                        CommBytes b = res.get(r).commBytes();
                        String ctx = c.strategy().cliName() + " N=" + c.worldSize() + " S=" + c.shardSize() + " M="
                                + c.microBatches() + " " + c.precision() + " rank " + r;
                        assertEquals(expected[0], b.sent(CommOp.ALL_GATHER), ctx + " all-gather");
                        assertEquals(expected[1], b.sent(CommOp.REDUCE_SCATTER), ctx + " reduce-scatter");
                        assertEquals(expected[2], b.sent(CommOp.ALL_REDUCE), ctx + " all-reduce");
                        assertEquals(b.sentBytes(), b.receivedBytes(), ctx);
                    }
                }
                System.out.printf("  %-15s N=%d S=%d M=%d %-38s all-gather %7d  reduce-scatter %6d  all-reduce %6d%n",
                        c.strategy().cliName(), c.worldSize(), c.shardSize(), c.microBatches(), c.precision(),
                        expected[0], expected[1], expected[2]);
            }
        }
    }
}
