// The cost of sharding on one machine: the same global batch trained by N = 1, 2, 4, ...
// in-process FSDP ranks that share the cores (each rank gets cores/N threads), timed with the
// step benchmark. N = 1 is the same engine with nothing to shard, so the ratio is the whole price of
// sharding: the all-gathers and reduce-scatters (memory copies here, hidden by prefetch where
// they can be) plus the smaller per-rank GEMMs. The target is N = 2, 4 within 1.25× of N = 1.
package org.fsdp4j.train;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

public final class ShardingBenchmark {

    /**
     * One world size.
     *
     * @param worldSize          N
     * @param stepTimeMsMedian   median step time
     * @param ratioToOneRank     median / the first row's median
     * @param tokensPerSecond    B·T / median
     * @param commBytesPerRank   bytes one rank sent per step (the largest over ranks)
     * @param peakBytesPerRank   the largest peak over ranks
     * @param step               the full step-benchmark result
     */
    public record Row(int worldSize, double stepTimeMsMedian, double ratioToOneRank, double tokensPerSecond,
                      long commBytesPerRank, long peakBytesPerRank, StepBenchmark.Result step) {
    }

    private ShardingBenchmark() {
    }

    /** Runs the step benchmark of {@code base} at each world size (the first is the baseline of the ratios). */
    public static List<Row> run(TrainConfig base, int[] worldSizes, int untimedSteps, int timedSteps,
                                Consumer<String> log, Consumer<RunInfo> onStart, Consumer<StepResult> onStep) {
        if (worldSizes.length == 0) {
            throw new IllegalArgumentException("give at least one world size");
        }
        List<Row> rows = new ArrayList<>();
        for (int n : worldSizes) {
            TrainConfig c = base.toBuilder().fsdp(f -> f.worldSize(n)).build();
            long[] comm = new long[1];
            StepBenchmark.Result r = StepBenchmark.run(c, untimedSteps, timedSteps, log, onStart, s -> {
                comm[0] = s.commBytes();
                onStep.accept(s);
            });
            double baseline = rows.isEmpty() ? r.stepTimeMsMedian() : rows.get(0).stepTimeMsMedian();
            long peak = 0;
            for (long p : r.peakBytesPerRank()) {
                peak = Math.max(peak, p);
            }
            rows.add(new Row(n, r.stepTimeMsMedian(), r.stepTimeMsMedian() / baseline, r.tokensPerSecond(), comm[0],
                    peak, r));
        }
        return rows;
    }
}
