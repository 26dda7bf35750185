// The memory model and the communication volume, each checked against numbers this test
// derives itself from the model's parameter shapes (not from the engine's layout):
//   persistent bytes per rank, fp32 FULL_SHARD with AdamW = 16·P′/N exactly;
//   peak bytes within issue 3's bound (persistent + the two largest gathered units + one unit's
//   gradient + activations), at most two gathered units at a time, and falling as N grows, for
//   a model whose blocks outweigh the root and one whose root (vocabulary) outweighs the blocks;
//   bytes sent per step per rank = (S−1)/S of each gathered or reduced unit, per pass.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.BATCH;
import static org.fsdp4j.fsdp.FsdpTestSupport.SEQ;
import static org.fsdp4j.fsdp.FsdpTestSupport.TINY;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.api.Unit;
import org.fsdp4j.comm.CommBytes;
import org.fsdp4j.comm.CommOp;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.GptModel;
import org.fsdp4j.optim.AdamW;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class FsdpAccountingTest {

    private final FsdpTestSupport t = new FsdpTestSupport();

    /** A root (vocabulary 512 × width 8) more than three times a block: the plan keeps its gradient. */
    private static final GptConfig BIG_VOCAB = new GptConfig(512, 8, 2, 2, 8);

    /** Unit sizes of TINY, computed here: each parameter start rounded up to 16 bytes, the end to a multiple of n. */
    private static long[] paddedUnitNumel(int n, int dtypeBytes) {
        return paddedUnitNumel(TINY, n, dtypeBytes);
    }

    private static long[] paddedUnitNumel(GptConfig model, int n, int dtypeBytes) {
        List<Unit> units;
        try (var b = FsdpTestSupport.cpu("shapes"); GptModel m = new GptModel(model, b, false)) {
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

    private LocalFsdpGroup group(FsdpOptions c) {
        return group(c, TINY);
    }

    private LocalFsdpGroup group(FsdpOptions c, GptConfig model) {
        return new LocalFsdpGroup(c, ctx -> new GptModel(model, ctx.ops(), false), new AdamW(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f),
                t.seed, org.fsdp4j.api.Device.CPU, FsdpTestSupport.RANK_BACKEND, UnaryOperator.identity());
    }

    static Stream<Arguments> models() {
        // TINY: root 474 parameters, blocks 1,330; BIG_VOCAB: root 4,176, blocks 872
        return Stream.of(Arguments.of("tiny", TINY, UnitBufferPlan.Schedule.ROOT_GRAD_SPLIT),
                Arguments.of("big-vocab", BIG_VOCAB, UnitBufferPlan.Schedule.ROOT_GRAD_KEPT));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void persistentBytesAre16PPrimeOverNAndPeakStaysWithinTheMemoryModel(String name, GptConfig model,
                                                                        UnitBufferPlan.Schedule schedule) {
        System.out.println("fp32 FULL_SHARD + AdamW, model " + name + " (vocab " + model.vocabSize() + " ctx "
                + model.maxSeqLen() + " L" + model.numLayers() + " C" + model.embedDim() + "), batch " + BATCH + "x" + SEQ
                + " (bytes per rank):");
        System.out.printf("%3s %6s %10s %10s %10s %10s %10s %10s %10s %10s%n", "N", "P'", "persistent", "peak", "bound",
                "params", "grads", "optimizer", "gathered", "activations");
        long previousPeak = Long.MAX_VALUE;
        for (int n : new int[] {1, 2, 4, 8}) {
            long[] unitNumel = paddedUnitNumel(model, n, 4);
            long pPrime = Arrays.stream(unitNumel).sum();
            long[] sorted = unitNumel.clone();
            Arrays.sort(sorted);
            long largest = 4 * sorted[sorted.length - 1];
            long twoLargest = largest + 4 * sorted[sorted.length - 2];
            long expectedPersistent = 16 * pPrime / n;
            try (LocalFsdpGroup g = group(FsdpTestSupport.config(n, ShardingStrategy.FULL_SHARD), model)) {
                if (n > 1) {
                    assertEquals(schedule, g.plan().schedule(), "N=" + n);
                    assertEquals(twoLargest + largest, g.plan().budgetBytes(), "N=" + n);
                }
                for (MemoryTracker m : g.deviceMemory()) {
                    assertEquals(expectedPersistent, m.persistentBytes(), "after construction, N=" + n);
                }
                g.deviceMemory().forEach(MemoryTracker::resetPeak);
                for (int s = 0; s < 2; s++) {
                    g.step(FsdpTestSupport.batch(t.tokens[s], t.targets[s]), 1e-3f);
                }
                long worstPeak = 0;
                long bound = 0;
                for (MemoryTracker m : g.deviceMemory()) {
                    assertEquals(expectedPersistent, m.persistentBytes(), "after steps, N=" + n);
                    assertEquals(expectedPersistent, m.liveBytes() - m.liveBytes(MemoryCategory.ACTIVATIONS),
                            "nothing but persistent state and the micro-batch tokens outlives a step, N=" + n);
                    // At most two units gathered at a time (the running one and its prefetch).
                    long gatheredBound = n == 1 ? 0 : twoLargest;
                    assertTrue(m.peakBytes(MemoryCategory.GATHERED) <= gatheredBound,
                            "gathered peak " + m.peakBytes(MemoryCategory.GATHERED) + " > " + gatheredBound + ", N=" + n);
                    // Issue 3's bound, as written: persistent + the two largest gathered units + one
                    // unit's gradient + activations (at N = 1 nothing is gathered and the model
                    // accumulates straight into the gradient shard).
                    bound = expectedPersistent + (n == 1 ? 0 : twoLargest + largest)
                            + m.peakBytes(MemoryCategory.ACTIVATIONS);
                    assertTrue(m.peakBytes() <= bound, "peak " + m.peakBytes() + " > bound " + bound + ", N=" + n);
                    worstPeak = Math.max(worstPeak, m.peakBytes());
                }
                MemoryTracker m0 = g.deviceMemory().get(0);
                System.out.printf("%3d %6d %10d %10d %10d %10d %10d %10d %10d %10d%n", n, pPrime, m0.persistentBytes(),
                        worstPeak, bound, m0.peakBytes(MemoryCategory.PARAMS), m0.peakBytes(MemoryCategory.GRADS),
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
        try (LocalFsdpGroup g = group(FsdpTestSupport.config(n, ShardingStrategy.FULL_SHARD).toBuilder().microBatches(3).build())) {
            g.deviceMemory().forEach(MemoryTracker::resetPeak);
            g.step(FsdpTestSupport.batch(t.tokens[0], t.targets[0]), 1e-3f);
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
        try (LocalFsdpGroup g = group(FsdpTestSupport.config(n, ShardingStrategy.FULL_SHARD).toBuilder().offload(true).build())) {
            g.step(FsdpTestSupport.batch(t.tokens[0], t.targets[0]), 1e-3f);
            for (int r = 0; r < n; r++) {
                assertEquals(16 * pPrime / n, g.hostMemory().get(r).persistentBytes());
                // the device keeps only the fp32 all-gather input shard
                assertEquals(4 * pPrime / n, g.deviceMemory().get(r).persistentBytes());
            }
        }
    }

    /**
     * Expected bytes this rank sends per step: computed from the unit sizes and the strategy.
     * FULL_SHARD and HYBRID_SHARD gather the root twice in forward (embedding, head) and each
     * block in both passes but the last, which stays gathered from its forward into its backward
     * (prefetch depth 1 or more); under ROOT_GRAD_SPLIT the root's gradient is reduced twice.
     */
    private static long[] expectedSentPerStep(FsdpOptions c, int layers, boolean rootGradSplit) {
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
            int reductions = u == 0 && rootGradSplit ? 2 : 1;
            switch (c.strategy()) {
                case FULL_SHARD:
                case HYBRID_SHARD:
                    int gathers = u == units.length - 1 && c.prefetch() >= 1 ? 1 : 2;
                    ag += (long) c.microBatches() * gathers * (s - 1) * shard * p;
                    rs += reductions * (s - 1) * shard * red;
                    ar += r > 1 ? reductions * 2L * (r - 1) * shard * red / r : 0;
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
        List<FsdpOptions> configs = new ArrayList<>();
        for (ShardingStrategy s : ShardingStrategy.values()) {
            configs.add(FsdpTestSupport.config(4, s));
        }
        configs.add(FsdpTestSupport.config(3, ShardingStrategy.FULL_SHARD).toBuilder().microBatches(2)
                .precision(new MixedPrecisionPolicy(DType.BF16, DType.BF16)).build());
        configs.add(FsdpTestSupport.config(8, ShardingStrategy.HYBRID_SHARD)
                .toBuilder().precision(new MixedPrecisionPolicy(DType.BF16, DType.F32)).build());
        configs.add(FsdpTestSupport.config(2, ShardingStrategy.FULL_SHARD).toBuilder().prefetch(0).build());   // last block freed too
        configs.add(FsdpTestSupport.config(2, ShardingStrategy.FULL_SHARD).toBuilder().prefetch(2).build());
        System.out.println("bytes sent per step per rank (received is equal):");
        for (FsdpOptions c : configs) {
            try (LocalFsdpGroup g = group(c)) {
                boolean split = g.plan().schedule() == UnitBufferPlan.Schedule.ROOT_GRAD_SPLIT;
                long[] expected = expectedSentPerStep(c, TINY.numLayers(), split);
                for (int s = 0; s < 2; s++) {
                    List<CommBytes> before = g.onEachRank((r, e) -> e.commBytes());
                    g.step(FsdpTestSupport.batch(t.tokens[s], t.targets[s]), 1e-3f);
                    List<CommBytes> after = g.onEachRank((r, e) -> e.commBytes());
                    for (int r = 0; r < c.worldSize(); r++) {
                        CommBytes b = after.get(r).minus(before.get(r));
                        String ctx = c.strategy().cliName() + " N=" + c.worldSize() + " S=" + c.shardSize() + " M="
                                + c.microBatches() + " " + c.precision() + " rank " + r;
                        assertEquals(expected[0], b.sent(CommOp.ALL_GATHER), ctx + " all-gather");
                        assertEquals(expected[1], b.sent(CommOp.REDUCE_SCATTER), ctx + " reduce-scatter");
                        assertEquals(expected[2], b.sent(CommOp.ALL_REDUCE), ctx + " all-reduce");
                        assertEquals(b.sentBytes(), b.receivedBytes(), ctx);
                    }
                }
                System.out.printf("  %-15s N=%d S=%d M=%d prefetch %d %-38s all-gather %7d  reduce-scatter %6d  all-reduce %6d%n",
                        c.strategy().cliName(), c.worldSize(), c.shardSize(), c.microBatches(), c.prefetch(), c.precision(),
                        expected[0], expected[1], expected[2]);
            }
        }
    }
}
