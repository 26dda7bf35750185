// How the engine schedules its unit-sized temporaries (gathered parameters and unsharded
// gradients, both in the param dtype) so that at every instant they fit the memory
// model: the (1 + prefetch depth) largest gathered units plus one unit's gradient. At the
// default depth 1 that is "two gathered units + one unit's gradient". The forward always fits
// (the root is freed between its embedding and head segments, so at most 1 + depth units are
// gathered). The backward has two schedules; the plan takes the one that communicates less
// among those that fit:
//
//   ROOT_GRAD_KEPT   the root's gradient accumulates through the whole backward and is reduced
//                    once; a block's reduce-scatter overlaps the next block's backward and its
//                    prefetch (FSDP2's schedule). Live at worst: root grad + running block's
//                    params and grad + the previous block's grad in flight + the prefetches.
//                    Fits when the root is large next to a block (a GPT with a real vocabulary).
//   ROOT_GRAD_SPLIT  every backward segment's gradient is reduced as soon as it ends (the root's
//                    twice per step, added into its shard), and a backward prefetch waits for
//                    the reduction in flight, so beside the running unit's params and grad there
//                    is either one gradient being reduced or the prefetched params, never both.
//                    Costs one more reduce-scatter of the root per step.
//
// Where the ranks gather in place (in-process fp32 ranks: FsdpEngine, docs/ARCHITECTURE.md), a
// gathered unit takes no memory of its own and only the unsharded gradients count. The schedule
// is still chosen as for gathered buffers, so that a run behaves (and is tested) the same either
// way. The peak counted is what is alive where the activations peak (the head's and the last
// block's backward): the root's gradient and the last block's, r + b. The gradients' own peak
// comes later (ROOT_GRAD_KEPT: r + 2b, a block further on), once a block's activations are freed.
//
// Only strategies that free parameters after forward and shard them (FULL_SHARD, HYBRID_SHARD
// with S > 1) have a bound to keep; the others hold whole parameters by design and keep FSDP2's
// schedule. Unsharded gradients accumulated over micro-batches are outside the bound (every
// unit's gradient lives until the last micro-batch, as issue 3 asks us to report honestly).
package org.fsdp4j.fsdp;

import java.util.Arrays;
import java.util.List;
import org.fsdp4j.api.FsdpOptions;

/**
 * @param schedule           the backward schedule the engine follows
 * @param budgetBytes        (1 + depth) largest gathered units + the largest unit's gradient; 0 when no bound applies
 * @param peakBytes          the most gathered-parameter plus unsharded-gradient bytes the schedule holds at once
 * @param keptPeakBytes      the same for ROOT_GRAD_KEPT, for the record
 * @param inPlace            the ranks gather in place: a gathered unit is their shared fp32 masters, no buffer
 */
public record UnitBufferPlan(Schedule schedule, long budgetBytes, long peakBytes, long keptPeakBytes, boolean inPlace) {

    public enum Schedule {
        ROOT_GRAD_KEPT, ROOT_GRAD_SPLIT;

        public String cliName() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    /** Reduce each backward segment's gradient as soon as the segment ends. */
    public boolean reducesEachSegment() {
        return schedule == Schedule.ROOT_GRAD_SPLIT;
    }

    /** A backward prefetch waits until the gradient reduction in flight has freed its buffer. */
    public boolean prefetchWaitsForReduction() {
        return schedule == Schedule.ROOT_GRAD_SPLIT;
    }

    /** Whether the schedule keeps the unit temporaries within the memory model's budget. */
    public boolean fitsBudget() {
        return budgetBytes == 0 || peakBytes <= budgetBytes;
    }

    /**
     * The plan for units laid out as {@code layouts} (root first, then blocks) under
     * {@code config}. Unit sizes are the padded flat sizes in the param dtype; the unsharded
     * gradient has the same size.
     */
    public static UnitBufferPlan of(List<FlatParamLayout> layouts, FsdpOptions config, boolean gathersInPlace) {
        long[] bytes = new long[layouts.size()];
        for (int u = 0; u < bytes.length; u++) {
            bytes[u] = layouts.get(u).numel() * layouts.get(u).paramDtype().byteSize();
        }
        return of(bytes, config.prefetch(),
                config.strategy().reshardsAfterForward() && config.shardSize() > 1, gathersInPlace);
    }

    /** As above from unit byte sizes (root first), gathering into buffers: what a planner can compute before building anything. */
    public static UnitBufferPlan of(long[] unitBytes, int prefetchDepth, boolean bounded) {
        return of(unitBytes, prefetchDepth, bounded, false);
    }

    /** As above; {@code gathersInPlace}: a gathered unit is the ranks' shared masters, which take no memory of their own. */
    public static UnitBufferPlan of(long[] unitBytes, int prefetchDepth, boolean bounded, boolean gathersInPlace) {
        if (!bounded || unitBytes.length == 0) {
            return new UnitBufferPlan(Schedule.ROOT_GRAD_KEPT, 0, 0, 0, false);
        }
        long r = unitBytes[0];
        long b = 0;                                      // the largest block
        for (int u = 1; u < unitBytes.length; u++) {
            b = Math.max(b, unitBytes[u]);
        }
        long[] sorted = unitBytes.clone();
        Arrays.sort(sorted);
        long budget = sorted[sorted.length - 1];         // one unit's gradient: the largest
        for (int k = 0; k < Math.min(1 + prefetchDepth, sorted.length); k++) {
            budget += sorted[sorted.length - 1 - k];     // the (1 + depth) largest gathered units
        }
        int blocks = unitBytes.length - 1;
        long dh = Math.min(prefetchDepth, blocks);       // blocks prefetched from the head's backward
        long db = Math.min(prefetchDepth, Math.max(0, blocks - 1));   // ... and from a block's
        long head = 2 * r + dh * b;                      // root params + root grad + prefetched blocks
        long kept = Math.max(head, r + (3 + db) * b);    // root grad + running params, grad, grad in flight, prefetches
        long split = Math.max(head, Math.max(r + 2 * b, 2 * b + Math.max(b, db * b)));
        Schedule schedule = kept <= budget ? Schedule.ROOT_GRAD_KEPT : Schedule.ROOT_GRAD_SPLIT;
        if (gathersInPlace) {
            long atActivationsPeak = r + b;              // the root's gradient and the last block's
            return new UnitBufferPlan(schedule, budget, atActivationsPeak, atActivationsPeak, true);
        }
        return new UnitBufferPlan(schedule, budget, schedule == Schedule.ROOT_GRAD_KEPT ? kept : split, kept, false);
    }
}
