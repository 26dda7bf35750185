// Times whole training steps: warm-up steps (JIT, allocator, caches), then the median of timed
// steps, reported as tokens/s, achieved GFLOP/s (Flops.trainingStep) and, where the backend
// knows its device's peak, MFU. It runs the real
// Trainer, so it measures exactly what `fsdp4j train` does on whatever device the config asks.
package org.fsdp4j.train;

import java.util.Arrays;
import java.util.OptionalDouble;
import java.util.function.Consumer;
import org.fsdp4j.backend.OpTiming;
import org.fsdp4j.metrics.Flops;
import org.fsdp4j.metrics.Stats;

public final class StepBenchmark {

    /**
     * @param model             model family (gpt, llama)
     * @param preset            model preset, within the family
     * @param device            resolved device
     * @param backend           backend in words
     * @param params            model parameters
     * @param worldSize         ranks
     * @param batchSize         B
     * @param seqLen            T
     * @param untimedSteps      warm-up steps, not timed
     * @param timedSteps        timed steps
     * @param stepTimesMs       every timed step
     * @param stepTimeMsMedian  median of the timed steps
     * @param tokensPerSecond   B·T / median
     * @param gflopPerStep      Flops.trainingStep / 1e9
     * @param achievedGflops    gflopPerStep / median seconds
     * @param peakBytesPerRank  peak tracked bytes per rank
     * @param peakTflopsPerRank the device's dense GEMM peak per rank, or null where unknown (the CPU)
     * @param mfu               achieved / (peak × ranks), or null where the peak is unknown
     * @param hostSyncsPerStep  the most times a rank's host waited for its device in one step (the budget is 1)
     * @param promotedCopies    GEMMs with mixed operand dtypes over the run (0 expected)
     */
    public record Result(String model, String preset, String device, String backend, long params, int worldSize, int batchSize,
                         int seqLen, int untimedSteps, int timedSteps, double[] stepTimesMs, double stepTimeMsMedian,
                         double tokensPerSecond, double gflopPerStep, double achievedGflops, long[] peakBytesPerRank,
                         Double peakTflopsPerRank, Double mfu, long hostSyncsPerStep, long promotedCopies) {
    }

    private StepBenchmark() {
    }

    /**
     * Runs {@code untimedSteps + timedSteps} steps of {@code config} (whose steps field is
     * ignored). {@code log} gets the device fallback line, {@code onStart} the run header,
     * {@code onStep} every step.
     */
    public static Result run(TrainConfig config, int untimedSteps, int timedSteps, Consumer<String> log,
                             Consumer<RunInfo> onStart, Consumer<StepResult> onStep) {
        if (untimedSteps < 0 || timedSteps < 1) {
            throw new IllegalArgumentException("the step benchmark needs --warmup >= 0 and --steps >= 1, got "
                    + untimedSteps + " and " + timedSteps);
        }
        int total = untimedSteps + timedSteps;
        TrainConfig c = config.toBuilder().steps(total).warmupSteps(Math.min(config.warmupSteps(), total)).build();
        try (Trainer trainer = new Trainer(c, log)) {
            onStart.accept(trainer.info());
            double[] timesMs = new double[timedSteps];
            for (int s = 0; s < total; s++) {
                if (s == untimedSteps) {
                    OpTiming.reset();   // the per-op tables (if on) cover the timed steps only
                }
                if (!trainer.hasNextStep()) {     // a non-finite step ended the run: nothing sensible to time
                    throw new IllegalArgumentException("the benchmark's run diverged at step "
                            + trainer.outcome().divergedAtStep() + " (" + trainer.outcome().divergence()
                            + "): benchmark a configuration that trains, e.g. with a lower --lr");
                }
                StepResult r = trainer.step();
                onStep.accept(r);
                if (s >= untimedSteps) {
                    timesMs[s - untimedSteps] = r.timeMs();
                }
            }
            double medianMs = Stats.median(timesMs);
            RunInfo info = trainer.info();
            double gflop = Flops.trainingStep(c.model(), info.parameters(), c.batchSize(), c.seqLen()) / 1e9;
            double achievedGflops = gflop / (medianMs / 1e3);
            OptionalDouble peak = trainer.executor().peakTflopsPerRank();
            Double peakTflops = peak.isPresent() ? peak.getAsDouble() : null;
            Double mfu = peak.isPresent() ? achievedGflops / 1e3 / (peak.getAsDouble() * info.worldSize()) : null;
            return new Result(c.model().family().cliName(), c.preset(), info.device(), info.backendName(),
                    info.parameters(), info.worldSize(), c.batchSize(), c.seqLen(), untimedSteps, timedSteps, Arrays.copyOf(timesMs, timesMs.length),
                    medianMs, c.tokensPerStep() / (medianMs / 1e3), gflop, achievedGflops,
                    trainer.summary().peakBytesPerRank(), peakTflops, mfu, trainer.summary().hostSyncsPerStep(),
                    trainer.summary().promotedCopies());
        }
    }
}
