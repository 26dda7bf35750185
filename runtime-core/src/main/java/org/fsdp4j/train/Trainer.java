// The training loop: data, learning-rate schedule, timing, memory accounting and the summary,
// around a StepExecutor that does the step itself (one rank here; the FSDP engine later).
// It prints nothing: callers get a RunInfo before the first step and a StepResult per step.
// The run ends after its planned steps, at a step whose loss or gradients are not finite
// (DivergenceWatch, under the config's NonFinitePolicy), or after requestStop (a signal); the
// summary says which. requestStop and summary may be called from another thread.
package org.fsdp4j.train;

import org.fsdp4j.fsdp.UnitBufferPlan;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.data.BatchSampler;
import org.fsdp4j.data.TokenCorpus;
import org.fsdp4j.fsdp.LossScaleFloorException;
import org.fsdp4j.metrics.Stats;
import org.fsdp4j.optim.CosineSchedule;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;

public final class Trainer implements AutoCloseable {

    /** Steps the tail mean of the loss averages over. */
    public static final int TAIL_STEPS = 10;

    private final TrainConfig config;
    private final BatchSampler sampler;
    private final CosineSchedule schedule;
    private final StepExecutor executor;
    private final RunInfo info;
    private final List<MemoryTracker> trackers;
    private final long[] peakBytesPerRank;
    private final List<MemoryTracker> hostTrackers;     // offloaded state, one per rank; empty without offload
    private final long[] hostPeakBytesPerRank;
    private final Map<MemoryCategory, long[]> peakBytesByCategory = new LinkedHashMap<>();
    private final Map<MemoryCategory, long[]> atPeakBytesByCategory = new LinkedHashMap<>();   // each rank's split of its highest peak
    private final DivergenceWatch watch;
    private float[] losses;                 // grown as steps complete: a huge --steps costs nothing up front
    private double[] stepTimesMs;
    private int completedSteps;
    private long hostSyncsPerStep;      // the most any rank's host waited for its device in one step
    private long promotedCopies;        // GEMMs with mixed operand dtypes, all steps and ranks
    private volatile String stopRequestedBy;
    private String failure;                 // a step threw: "step 12: ...", for the summary

    /**
     * Loads the data, resolves the device ({@code log} receives the line explaining a fallback
     * from auto to cpu) and builds the model. Bad input (missing data, too short for the
     * sequence length, unusable device) is an IllegalArgumentException that says what to change.
     */
    public Trainer(TrainConfig config, Consumer<String> log) {
        this(config, log, EngineStepExecutor::new);
    }

    /** As above with the step executor {@code executors} builds (tests substitute one). */
    Trainer(TrainConfig config, Consumer<String> log, BiFunction<TrainConfig, Device, StepExecutor> executors) {
        this.config = config;
        config.outDir().ifPresent(Trainer::checkOutDir);
        TokenCorpus corpus = config.dataFile().map(TokenCorpus::fromFile).orElseGet(TokenCorpus::embeddedDefault);
        if (corpus.vocabSize() > config.model().vocabSize()) {
            throw new IllegalArgumentException("the data has " + corpus.vocabSize() + " token values but the "
                    + config.preset() + " model's vocabulary has " + config.model().vocabSize()
                    + ": use a preset with a vocabulary of at least " + corpus.vocabSize());
        }
        this.sampler = new BatchSampler(corpus, config.batchSize(), config.seqLen(), config.seed());
        this.schedule = new CosineSchedule(config.lr(), config.minLr(), config.warmupSteps(), config.steps());
        Device device = Backends.resolve(config.device(), log);
        this.executor = executors.apply(config, device);
        this.trackers = executor.memoryTrackers();
        this.peakBytesPerRank = new long[trackers.size()];
        this.hostTrackers = executor.hostMemoryTrackers();
        this.hostPeakBytesPerRank = new long[hostTrackers.size()];
        for (MemoryCategory c : MemoryCategory.values()) {
            peakBytesByCategory.put(c, new long[trackers.size()]);
            atPeakBytesByCategory.put(c, new long[trackers.size()]);
        }
        this.info = new RunInfo(config, device.toString(), executor.backendName(), executor.parameterCount(),
                executor.worldSize(), corpus.description(), corpus.lossFloorNats(), executor.unitBufferPlan());
        this.watch = new DivergenceWatch(config.onNonFinite(), config.precision().needsLossScaling());
        this.losses = new float[Math.min(config.steps(), 1024)];
        this.stepTimesMs = new double[losses.length];
    }

    private static void checkOutDir(Path dir) {
        if (Files.exists(dir) && !Files.isDirectory(dir)) {
            throw new IllegalArgumentException("output path " + dir + " exists and is not a directory: pass --out a directory");
        }
    }

    public RunInfo info() {
        return info;
    }

    public TrainConfig config() {
        return config;
    }

    /** Whether another step is due: not all have run, the run has not diverged or failed, and no stop was requested. */
    public synchronized boolean hasNextStep() {
        return completedSteps < config.steps() && watch.divergence().isEmpty() && stopRequestedBy == null
                && failure == null;
    }

    /**
     * Asks the run to stop after the step in progress; {@code why} ("SIGINT") goes into the
     * summary. Safe to call from any thread (a signal handler's).
     */
    public void requestStop(String why) {
        stopRequestedBy = why;
    }

    /** Runs the next step and reports it. */
    public StepResult step() {
        if (!hasNextStep()) {
            throw new IllegalStateException(watch.divergence().isPresent() ? "the run diverged at step "
                    + watch.divergence().get().step() : failure != null ? "the run failed at " + failure
                    : stopRequestedBy != null ? "the run was stopped (" + stopRequestedBy + ")"
                    : "all " + config.steps() + " steps have run");
        }
        int step = completedSteps + 1;
        float lr = schedule.lr(step);
        var batch = sampler.sample(step);
        trackers.forEach(MemoryTracker::resetPeak);
        hostTrackers.forEach(MemoryTracker::resetPeak);
        long start = System.nanoTime();
        StepExecutor.StepOutcome outcome;
        boolean atLossScaleFloor = false;
        try {
            outcome = executor.step(batch, step, lr);
        } catch (RuntimeException | Error e) {
            if (!LossScaleFloorException.isCauseOf(e)) {
                synchronized (this) {
                    failure = "step " + step + ": " + e;     // the summary of the steps before still tells
                }
                throw e;
            }
            atLossScaleFloor = true;        // fp16: no scale makes the gradients finite; loss unknown
            outcome = new StepExecutor.StepOutcome(Float.NaN, Double.NaN, true, 0, 0);
        }
        double timeMs = (System.nanoTime() - start) / 1e6;
        long live = 0;
        long peak = 0;
        Map<MemoryCategory, Long> peakSplit = Map.of();
        for (int r = 0; r < trackers.size(); r++) {
            MemoryTracker t = trackers.get(r);
            live = Math.max(live, t.liveBytes());
            Map<MemoryCategory, Long> split = t.atPeakByCategory();
            if (r == 0 || t.peakBytes() > peak) {
                peak = t.peakBytes();
                peakSplit = split;
            }
            if (completedSteps == 0 || t.peakBytes() > peakBytesPerRank[r]) {
                for (Map.Entry<MemoryCategory, Long> e : split.entrySet()) {
                    atPeakBytesByCategory.get(e.getKey())[r] = e.getValue();
                }
            }
            peakBytesPerRank[r] = Math.max(peakBytesPerRank[r], t.peakBytes());
            for (Map.Entry<MemoryCategory, Long> e : t.peakByCategory().entrySet()) {
                long[] perRank = peakBytesByCategory.get(e.getKey());
                perRank[r] = Math.max(perRank[r], e.getValue());
            }
        }
        for (int r = 0; r < hostTrackers.size(); r++) {
            hostPeakBytesPerRank[r] = Math.max(hostPeakBytesPerRank[r], hostTrackers.get(r).peakBytes());
        }
        synchronized (this) {
            if (completedSteps == losses.length) {
                losses = Arrays.copyOf(losses, (int) Math.min(config.steps(), 2L * losses.length));
                stepTimesMs = Arrays.copyOf(stepTimesMs, losses.length);
            }
            hostSyncsPerStep = Math.max(hostSyncsPerStep, outcome.hostSyncs());
            promotedCopies += outcome.promotedCopies();
            losses[completedSteps] = outcome.loss();
            stepTimesMs[completedSteps] = timeMs;
            completedSteps = step;
            if (atLossScaleFloor) {
                watch.lossScaleFloor(step);
            } else {
                watch.observe(step, outcome);
            }
        }
        return new StepResult(step, config.steps(), outcome.loss(), outcome.gradNorm(), lr, timeMs,
                config.tokensPerStep() / (timeMs / 1e3), live, peak, peakSplit, outcome.skipped(),
                Arrays.stream(executor.commBytesPerRank()).max().orElse(0), outcome.hostSyncs(),
                outcome.promotedCopies());
    }

    /**
     * Runs the remaining steps, handing each result to {@code onStep}, and returns the summary:
     * of every planned step, or of those before a stop request or up to a non-finite step.
     */
    public TrainSummary run(Consumer<StepResult> onStep) {
        while (hasNextStep()) {
            onStep.accept(step());
        }
        return summary();
    }

    /** The summary of the steps run so far (none yet: NaN times and losses, written as null). */
    public synchronized TrainSummary summary() {
        float[] done = Arrays.copyOf(losses, completedSteps);
        double[] times = Arrays.copyOf(stepTimesMs, completedSteps);
        double medianMs = completedSteps == 0 ? Double.NaN : Stats.median(times);
        double totalMs = 0;
        for (double t : times) {
            totalMs += t;
        }
        long[] persistent = new long[trackers.size()];
        for (int r = 0; r < trackers.size(); r++) {
            persistent[r] = trackers.get(r).persistentBytes();
        }
        Map<String, long[]> byCategory = new LinkedHashMap<>();
        peakBytesByCategory.forEach((c, perRank) -> byCategory.put(c.label(), perRank.clone()));
        Map<String, long[]> atPeak = new LinkedHashMap<>();
        atPeakBytesByCategory.forEach((c, perRank) -> atPeak.put(c.label(), perRank.clone()));
        Double floor = info.lossFloorNats().isPresent() ? info.lossFloorNats().getAsDouble() : null;
        return new TrainSummary(config.model().family().cliName(), config.preset(), info.parameters(), info.worldSize(), info.device(),
                info.backendName(), info.data(), completedSteps, config.batchSize(), config.seqLen(), config.seed(),
                floor, done, completedSteps == 0 ? Float.NaN : done[completedSteps - 1],
                completedSteps == 0 ? Double.NaN : Stats.tailMean(done, TAIL_STEPS), medianMs,
                config.tokensPerStep() / (medianMs / 1e3), totalMs / 1e3, persistent, peakBytesPerRank.clone(),
                byCategory, atPeak, config.strategy().cliName(), config.precision().paramDtype().shortName(),
                config.precision().reduceDtype().shortName(), config.microBatches(), executor.paddedParameterCount(),
                executor.commBytesPerRank(),
                executor.unitBufferPlan().map(pl -> pl.schedule().cliName()).orElse(null),
                executor.unitBufferPlan().map(UnitBufferPlan::budgetBytes).orElse(null),
                hostTrackers.isEmpty() ? null : hostTrackers.stream().mapToLong(MemoryTracker::persistentBytes).toArray(),
                hostTrackers.isEmpty() ? null : hostPeakBytesPerRank.clone(), hostSyncsPerStep, promotedCopies,
                config.debugStreams(), outcome());
    }

    /** How the run ended so far. */
    public synchronized RunOutcome outcome() {
        var d = watch.divergence();
        boolean interrupted = stopRequestedBy != null && completedSteps < config.steps() && d.isEmpty() && failure == null;
        return new RunOutcome(config.steps(), watch.skippedSteps(), interrupted, interrupted ? stopRequestedBy : null,
                d.map(DivergenceWatch.Divergence::step).orElse(null), d.map(v -> v.kind().jsonName()).orElse(null),
                failure);
    }

    /** The step executor (for tests that inspect parameters). */
    public StepExecutor executor() {
        return executor;
    }

    @Override
    public void close() {
        executor.close();
    }
}
