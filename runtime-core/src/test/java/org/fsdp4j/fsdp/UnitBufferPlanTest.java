// The unit buffer plan picks the schedule that fits the memory model with the least extra
// communication, and its peak arithmetic matches the schedules as described (the engine's
// measured peaks are checked against the same bound in FsdpAccountingTest).
package org.fsdp4j.fsdp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.api.Unit;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.GptModel;
import org.junit.jupiter.api.Test;

class UnitBufferPlanTest {

    /** Padded unit sizes in bytes of a preset sharded N ways, root first. */
    private static long[] unitBytes(String preset, DType dtype, int n) {
        try (Backend b = FsdpTestSupport.cpu("shapes"); GptModel m = new GptModel(GptConfig.preset(preset), b, false)) {
            List<Unit> units = m.units();
            long[] out = new long[units.size()];
            for (int u = 0; u < out.length; u++) {
                out[u] = FlatParamLayout.of(units.get(u).params(), dtype, n).numel() * dtype.byteSize();
            }
            return out;
        }
    }

    @Test
    void aLargeVocabularyKeepsTheRootGradientLikeFsdp2() {
        long[] bytes = unitBytes("gpt2-124m", DType.BF16, 8);
        long root = bytes[0];
        long block = bytes[1];
        assertTrue(root > 3 * block, "gpt2-124m's root (tied 50257x768 embedding) outweighs three blocks");
        UnitBufferPlan p = UnitBufferPlan.of(bytes, 1, true);
        assertEquals(UnitBufferPlan.Schedule.ROOT_GRAD_KEPT, p.schedule());
        assertEquals(root + block + root, p.budgetBytes());      // the two largest gathered units + the largest gradient
        assertEquals(2 * root + block, p.peakBytes());           // head backward: root params, root grad, next block
        assertTrue(p.fitsBudget());
        assertFalse(p.reducesEachSegment());
        assertFalse(p.prefetchWaitsForReduction());
    }

    @Test
    void blocksHeavierThanTheRootSplitTheRootReduction() {
        long[] bytes = unitBytes("tiny", DType.F32, 2);
        long root = bytes[0];
        long block = bytes[1];
        assertTrue(block > root);
        UnitBufferPlan p = UnitBufferPlan.of(bytes, 1, true);
        assertEquals(UnitBufferPlan.Schedule.ROOT_GRAD_SPLIT, p.schedule());
        assertEquals(3 * block, p.budgetBytes());
        // keeping the root's gradient would hold it beside 2 blocks' params and 2 blocks' gradients
        assertEquals(root + 4 * block, p.keptPeakBytes());
        assertEquals(3 * block, p.peakBytes());                  // exactly the budget: running params + grad + one more
        assertTrue(p.reducesEachSegment());
        assertTrue(p.prefetchWaitsForReduction());
    }

    @Test
    void deeperPrefetchWidensTheBudgetAndNoPrefetchCannotMeetIt() {
        long[] bytes = unitBytes("bench-4x256", DType.F32, 4);
        long block = bytes[1];
        assertTrue(block > bytes[0]);
        UnitBufferPlan deep = UnitBufferPlan.of(bytes, 2, true);
        assertEquals(4 * block, deep.budgetBytes());             // three gathered + one gradient
        assertTrue(deep.fitsBudget());
        // Without prefetch a block's reduction still overlaps the next block's backward: three
        // buffers against a budget of two, and the plan says so rather than hiding it.
        UnitBufferPlan none = UnitBufferPlan.of(bytes, 0, true);
        assertEquals(2 * block, none.budgetBytes());
        assertEquals(3 * block, none.peakBytes());
        assertFalse(none.fitsBudget());
    }

    @Test
    void gatheringInPlaceKeepsTheScheduleAndCountsOnlyGradients() {
        for (String preset : List.of("tiny", "gpt2-124m")) {
            long[] bytes = unitBytes(preset, DType.F32, 2);
            long root = bytes[0];
            long block = bytes[1];
            UnitBufferPlan buffers = UnitBufferPlan.of(bytes, 1, true);
            UnitBufferPlan inPlace = UnitBufferPlan.of(bytes, 1, true, true);
            assertEquals(buffers.schedule(), inPlace.schedule(), preset + ": the same schedule, so the same step");
            assertEquals(buffers.budgetBytes(), inPlace.budgetBytes(), preset);
            assertEquals(root + block, inPlace.peakBytes(), preset + ": the gradients alive where the activations peak");
            assertTrue(inPlace.inPlace() && !buffers.inPlace(), preset);
            assertTrue(inPlace.peakBytes() < buffers.peakBytes(), preset + ": no gathered units");
        }
    }

    @Test
    void strategiesThatKeepParametersHaveNoBudget() {
        for (ShardingStrategy s : List.of(ShardingStrategy.SHARD_GRAD_OP, ShardingStrategy.OPTIMIZER_ONLY,
                ShardingStrategy.NO_SHARD)) {
            FsdpOptions c = FsdpTestSupport.config(4, s);
            UnitBufferPlan p = UnitBufferPlan.of(unitLayouts(c), c, false);
            assertEquals(0, p.budgetBytes(), s.cliName());
            assertEquals(UnitBufferPlan.Schedule.ROOT_GRAD_KEPT, p.schedule(), s.cliName());
        }
        FsdpOptions one = FsdpTestSupport.config(1, ShardingStrategy.FULL_SHARD);
        assertEquals(0, UnitBufferPlan.of(unitLayouts(one), one, false).budgetBytes(), "one rank gathers nothing");
    }

    private static List<FlatParamLayout> unitLayouts(FsdpOptions c) {
        try (Backend b = FsdpTestSupport.cpu("shapes"); GptModel m = new GptModel(FsdpTestSupport.TINY, b, false)) {
            return m.units().stream().map(u -> FlatParamLayout.of(u.params(), c.precision().paramDtype(), c.shardSize()))
                    .toList();
        }
    }
}
