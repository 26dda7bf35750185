// The training loop: data, learning-rate schedule, timing, memory accounting and the summary,
// around a StepExecutor that does the step itself (EngineStepExecutor: the FSDP engine over the
// run's ranks; tests put scripted executors there).
// It prints nothing: callers get a RunInfo before the first step and a StepResult per step.
// The run ends after its planned steps, at a step whose loss or gradients are not finite
// (DivergenceWatch, under the config's NonFinitePolicy), or after requestStop (a signal); the
// summary says which. requestStop and summary may be called from another thread.
// Checkpoints (CheckpointOptions): a resumed run loads every rank's shards, the optimizer's step
// count, the loss scaler and the losses so far before its first step, and continues at the saved
// step + 1 (batches and the schedule are functions of the step). A save copies the ranks' state
// to the host at a step boundary (the only time the step is blocked) and a Checkpointer writes
// it on a background thread. Over several processes each saves its own ranks into the one shared
// --save-dir and process 0 commits (Checkpointer); a resume loads the checkpoint process 0 names
// (SharedResume); a step that fails while a save is in flight reports the save's failure when
// there is one, since that is where the run broke (a process that died mid-save). The planner's
// prediction for the run is compared with the first step's measured memory (MemoryCheck). In a
// run over several processes each process measures its own ranks; JobFigures pools them so
// process 0 reports for all N ranks (per step, and in the summary of a run that reaches its end).
// With --eval-every K, every K-th step (step % K == 0, so a resumed run keeps the schedule) ends
// with the validation loss: the mean over the same --eval-batches held-out batches (HeldOut)
// every time, forward only, outside the step's time and memory figures.
package org.fsdp4j.train;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.LossScaleFloorException;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.api.ShardingInfo;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.checkpoint.CheckpointIndex;
import org.fsdp4j.checkpoint.CheckpointReader;
import org.fsdp4j.checkpoint.Checkpointer;
import org.fsdp4j.checkpoint.SharedResume;
import org.fsdp4j.data.BatchSampler;
import org.fsdp4j.data.DocumentEncoder;
import org.fsdp4j.data.HeldOut;
import org.fsdp4j.data.HeldOutStream;
import org.fsdp4j.data.StreamSampler;
import org.fsdp4j.data.TokenCorpus;
import org.fsdp4j.data.TokenShards;
import org.fsdp4j.data.TokenStream;
import org.fsdp4j.data.Tokenizer;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.metrics.Stats;
import org.fsdp4j.optim.CosineSchedule;
import org.fsdp4j.plan.Planner;
import org.fsdp4j.plan.StepCost;

public final class Trainer implements AutoCloseable {

    /** Steps the tail mean of the loss averages over. */
    public static final int TAIL_STEPS = 10;

    private final TrainConfig config;
    private final BatchSampler sampler;         // the byte-level data's random windows, or null
    private final StreamSampler stream;         // a token stream's windows in order, or null
    private final java.util.function.IntFunction<Batch> validation;   // held-out batch k (1..M); null without --eval-every
    private final List<TrainSummary.ValLoss> valLosses = new java.util.ArrayList<>();   // guarded by this
    private final CosineSchedule schedule;
    private final StepExecutor executor;
    private final RunInfo info;
    private final List<MemoryTracker> trackers;
    private final long[] peakBytesPerRank;
    private volatile long[] sentBytesPerRank;        // by rank of this process, in the last step (received is equal)
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
    private volatile String stopSignalled;  // several processes: a stop asked of this one, put to the vote at the step's end
    private String failure;                 // a step threw: "step 12: ...", for the summary
    private final CheckpointOptions checkpoints;
    private final Checkpointer checkpointer;    // null without --save-dir
    private final Consumer<String> log;
    private final ResumedFrom resumedFrom;      // null for a fresh run
    private int lastSavedStep = -1;
    private final StepCost predicted;           // the planner's, for the memory check after the first step
    private MemoryCheck memoryCheck;            // set by the first step this process runs
    private List<List<long[]>> memoryTimelines = List.of();   // per rank, over the first step this process ran
    private JobFigures jobFigures;              // several processes: how they pool figures; made when first needed
    private MemoryCheck wholeRunMemoryCheck;    // several processes, on process 0: every rank's first step
    private RankFigures wholeRunFigures;        // several processes: every rank's, once the run reached its end
    /** Allocations and frees recorded per rank for the memory-over-a-step chart. */
    private static final int TIMELINE_EVENTS = 200_000;

    /** Where a resumed run's state came from. */
    public record ResumedFrom(String path, int step, int worldSize, String strategy) {
    }

    /**
     * Loads the data, resolves the device ({@code log} receives the line explaining a fallback
     * from auto to cpu) and builds the model. Bad input (missing data, too short for the
     * sequence length, unusable device) is an IllegalArgumentException that says what to change.
     */
    public Trainer(TrainConfig config, Consumer<String> log) {
        this(config, CheckpointOptions.none(), log);
    }

    /**
     * As above, saving and resuming as {@code checkpoints} says. A checkpoint that cannot be used
     * (incomplete, corrupted, another model) is a CheckpointException naming the file.
     */
    public Trainer(TrainConfig config, CheckpointOptions checkpoints, Consumer<String> log) {
        this(config, null, checkpoints, log, (c, d) -> new EngineStepExecutor(c), null);
    }

    /**
     * As above for one process of a run over several ({@code processes}): it trains its share
     * of the ranks on the same batches as every other process, and stops when they all agree.
     */
    public Trainer(TrainConfig config, Consumer<String> log, ProcessGroup processes) {
        this(config, CheckpointOptions.none(), log, processes);
    }

    /**
     * As above, saving and resuming as {@code checkpoints} says: every process saves its own ranks
     * into the one --save-dir (which every process must see) and resumes from the checkpoint process 0 names.
     */
    public Trainer(TrainConfig config, CheckpointOptions checkpoints, Consumer<String> log, ProcessGroup processes) {
        this(config, null, checkpoints, log, (c, d) -> new EngineStepExecutor(c, processes), processes);
    }

    /**
     * As above for a caller that resolved the run's device already ({@code device}, from
     * Backends.resolve of {@code config}'s, which it pinned: the command line, before its
     * preflight), so the run resolves it once. {@code processes} is null for a run in one process.
     */
    public Trainer(TrainConfig config, Device device, CheckpointOptions checkpoints, Consumer<String> log,
                   ProcessGroup processes) {
        this(config, device, checkpoints, log, (c, d) -> new EngineStepExecutor(c, processes), processes);
    }

    /** As above with the step executor {@code executors} builds (tests substitute one). */
    Trainer(TrainConfig config, Consumer<String> log, BiFunction<TrainConfig, Device, StepExecutor> executors) {
        this(config, null, CheckpointOptions.none(), log, executors, null);
    }

    private Trainer(TrainConfig asked, Device resolved, CheckpointOptions checkpoints, Consumer<String> log,
                    BiFunction<TrainConfig, Device, StepExecutor> executors, ProcessGroup processes) {
        // the device is resolved once per run (here unless the caller did) and auto pinned to the result:
        // the executor, the engine's placement and the planner get it, and no fallback is decided twice
        Device device = resolved != null ? resolved : Backends.resolve(asked.fsdp().device(), log);
        String pinned = Backends.pin(asked.fsdp().device(), device);
        TrainConfig config = pinned.equals(asked.fsdp().device()) ? asked
                : asked.toBuilder().fsdp(f -> f.device(pinned)).build();
        this.config = config;
        this.checkpoints = checkpoints;
        this.log = log;
        config.outDir().ifPresent(Trainer::checkOutDir);
        String dataDescription;
        java.util.OptionalDouble lossFloor;
        Optional<Tokenizer> tokenizer = config.tokenizer().map(Tokenizer::load);
        tokenizer.ifPresent(t -> checkVocab(t.vocabSize(), t.describe(), config));
        boolean shards = config.dataFile().filter(Files::isDirectory).isPresent();
        if (shards || tokenizer.isPresent()) {
            // a token stream read in order: the shards of a folder, or a file tokenized here, whole
            TokenStream tokens;
            TokenStream held = null;
            if (shards) {
                HeldOutStream split = config.evalEvery() == 0 ? null : HeldOutStream.ofShards(config.dataFile().get());
                tokens = split == null ? TokenShards.open(config.dataFile().get(), "train") : split.train();
                held = split == null ? null : split.validation();
            } else {
                Path file = config.dataFile().orElseThrow(() -> new IllegalArgumentException("--tokenizer needs"
                        + " --data: give the text file (or shard folder) to train on"));
                int[] ids = tokenize(file, tokenizer.get());
                String description = "file " + file + " (" + ids.length + " tokens)";
                HeldOutStream split = config.evalEvery() == 0 ? null
                        : HeldOutStream.lastPartOf(ids, description, config.batchSize() * config.seqLen() + 1);
                tokens = split == null ? TokenStream.of(ids, description) : split.train();
                held = split == null ? null : split.validation();
            }
            this.sampler = null;
            this.stream = new StreamSampler(tokens, config.batchSize(), config.seqLen(), config.model().vocabSize());
            this.validation = held == null ? null : heldOutBatches(new StreamSampler(held, config.batchSize(),
                    config.seqLen(), config.model().vocabSize()), config.evalBatches());
            dataDescription = tokens.description() + tokenizer.map(t -> ", " + t.describe()).orElse("");
            lossFloor = java.util.OptionalDouble.empty();
        } else {
            TokenCorpus corpus = config.dataFile().map(TokenCorpus::fromFile).orElseGet(TokenCorpus::embeddedDefault);
            if (corpus.vocabSize() > config.model().vocabSize()) {
                throw new IllegalArgumentException("the data has " + corpus.vocabSize() + " token values but the "
                        + config.preset() + " model's vocabulary has " + config.model().vocabSize()
                        + ": use a preset with a vocabulary of at least " + corpus.vocabSize());
            }
            HeldOut heldOut = heldOut(config, corpus);
            if (heldOut != null) {
                corpus = heldOut.train();
            }
            BatchSampler heldOutSampler = heldOut == null ? null
                    : new BatchSampler(heldOut.validation(), config.batchSize(), config.seqLen(), config.fsdp().seed());
            this.validation = heldOutSampler == null ? null : heldOutSampler::sample;
            this.sampler = new BatchSampler(corpus, config.batchSize(), config.seqLen(), config.fsdp().seed());
            this.stream = null;
            dataDescription = corpus.description();
            lossFloor = corpus.lossFloorNats();
        }
        this.schedule = new CosineSchedule(config.fsdp().lr(), config.minLr(), config.warmupSteps(), config.steps());
        this.executor = executors.apply(config, device);
        this.trackers = executor.memoryTrackers();
        this.peakBytesPerRank = new long[trackers.size()];
        this.sentBytesPerRank = new long[trackers.size()];
        this.hostTrackers = executor.hostMemoryTrackers();
        this.hostPeakBytesPerRank = new long[hostTrackers.size()];
        for (MemoryCategory c : MemoryCategory.values()) {
            peakBytesByCategory.put(c, new long[trackers.size()]);
            atPeakBytesByCategory.put(c, new long[trackers.size()]);
        }
        this.info = new RunInfo(config, device.toString(), executor.backendName(), executor.parameterCount(),
                executor.worldSize(), dataDescription, lossFloor,
                executor.gatherSchedule().filter(s -> config.reportsSharding()));
        this.watch = new DivergenceWatch(config.onNonFinite(), config.fsdp().precision().needsLossScaling());
        this.losses = new float[Math.min(config.steps(), 1024)];
        this.stepTimesMs = new double[losses.length];
        this.predicted = new Planner().estimate(config.planInput(), !device.isCpu(), executor.gathersInPlace());
        try {
            this.resumedFrom = checkpoints.resume().map(r -> resume(processes == null
                    ? Checkpointer.resolve(r, checkpoints.saveDir(), log)
                    : SharedResume.resolve(r, checkpoints.saveDir(), log, processes, config.fsdp().collectiveTimeout())))
                    .orElse(null);
        } catch (RuntimeException e) {
            executor.close();
            throw e;
        }
        this.checkpointer = checkpoints.saveDir().map(d -> processes == null ? new Checkpointer(d, checkpoints.keep(), log)
                : new Checkpointer(d, checkpoints.keep(), log, processes, config.fsdp().collectiveTimeout())).orElse(null);
    }

    /**
     * The run's held-out split, with --eval-every (else null): the seam where a data source with
     * a validation split of its own is told apart from {@code corpus}, what the run trains on.
     */
    private static HeldOut heldOut(TrainConfig config, TokenCorpus corpus) {
        return config.evalEvery() == 0 ? null : HeldOut.of(corpus, config.dataFile().isEmpty(), config.seqLen());
    }

    /**
     * The validation loss after step {@code step}: the mean of the --eval-batches held-out
     * batches' losses, each a global batch every rank takes its slice of, as in training.
     */
    private float validationLoss(int step) {
        double sum = 0;
        try {
            for (int k = 1; k <= config.evalBatches(); k++) {
                sum += executor.evaluate(validation.apply(k));
            }
        } catch (RuntimeException | Error e) {
            synchronized (this) {
                failure = "step " + step + "'s validation loss: " + e;
            }
            throw e;
        }
        float loss = (float) (sum / config.evalBatches());
        synchronized (this) {
            valLosses.add(new TrainSummary.ValLoss(step, loss));
        }
        return loss;
    }

    /** Loads the checkpoint in {@code dir} into every rank and continues at its step + 1. */
    private ResumedFrom resume(java.nio.file.Path dir) {
        try (CheckpointReader reader = CheckpointReader.open(dir)) {
            CheckpointIndex index = reader.index();
            reader.checkModel(config.model());
            if (index.step() >= config.steps()) {
                // no step would run: the summary would be the old run's loss with no step time
                throw new IllegalArgumentException("the checkpoint " + dir + " is at step " + index.step() + " and --steps is "
                        + config.steps() + ": nothing is left to run; raise --steps to continue (e.g. --steps "
                        + (index.step() + config.steps()) + ")");
            }
            CheckpointIndex.DataPosition d = index.data();
            if (d.seed() != config.fsdp().seed() || d.batchSize() != config.batchSize() || d.seqLen() != config.seqLen()
                    || d.plannedSteps() != config.steps()) {
                log.accept("note: the checkpoint's run had --seed " + d.seed() + " --batch-size " + d.batchSize()
                        + " --seq-len " + d.seqLen() + " --steps " + d.plannedSteps() + "; this run's batches or "
                        + "learning-rate schedule differ from it");
            }
            if (stream != null) {       // the stream continues where the saved run's next batch began
                if (d.tokenPosition() != null) {
                    stream.seek(d.tokenPosition());
                } else {
                    stream.skip(index.step());
                }
            }
            executor.loadState(reader, new ShardedStateDict.Progress(index.optimizer().step(),
                    index.lossScaler().scale(), index.lossScaler().goodSteps()));
            completedSteps = Math.min(index.step(), config.steps());
            float[] saved = index.losses() == null ? new float[0] : index.losses();
            losses = Arrays.copyOf(saved, Math.max(losses.length, Math.min(config.steps(), saved.length + 1024)));
            stepTimesMs = new double[losses.length];
            Arrays.fill(stepTimesMs, Double.NaN);             // steps run by the earlier process
            completedSteps = Math.min(completedSteps, saved.length);
            lastSavedStep = completedSteps;
            String sameShape = index.worldSize() == config.fsdp().worldSize() && index.strategy().equals(config.fsdp().strategy().cliName())
                    && index.shardSize() == config.fsdp().shardSize() ? "" : " (re-sliced from " + index.worldSize()
                    + " ranks, " + index.strategy() + ")";
            log.accept("resumed from " + dir + " at step " + index.step() + sameShape);
            return new ResumedFrom(dir.toString(), index.step(), index.worldSize(), index.strategy());
        }
    }

    /** Refuses, before the first step, a model whose vocabulary does not cover the tokenizer's. */
    private static void checkVocab(int tokenizerVocab, String tokenizer, TrainConfig config) {
        if (tokenizerVocab > config.model().vocabSize()) {
            throw new IllegalArgumentException("the tokenizer has " + tokenizerVocab + " tokens but the " + config.preset()
                    + " model's vocabulary has " + config.model().vocabSize() + " (" + tokenizer + "): give the model"
                    + " the tokenizer's vocabulary (--vocab " + tokenizerVocab + ", or a --model-config with its vocab_size)");
        }
    }

    /** A text file's tokens, the whole file one document. */
    private static int[] tokenize(Path file, Tokenizer tokenizer) {
        TokenCorpus.checkReadable(file);
        String text;
        try {
            text = Files.readString(file);
        } catch (java.nio.charset.MalformedInputException e) {
            throw new IllegalArgumentException("data file " + file + " is not UTF-8 text: convert it to UTF-8, or train"
                    + " on its bytes (--data without --tokenizer)");
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("cannot read data file " + file + " (" + e.getMessage()
                    + "): check that it is readable", e);
        }
        return DocumentEncoder.encode(tokenizer, text);
    }

    /** The first {@code count} batches of a held-out stream, read once: every evaluation measures the same ones. */
    private static java.util.function.IntFunction<Batch> heldOutBatches(StreamSampler held, int count) {
        List<Batch> batches = new java.util.ArrayList<>(count);
        for (int k = 0; k < count; k++) {
            batches.add(held.next());
        }
        return k -> batches.get(k - 1);
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
     * summary. Safe to call from any thread (a signal handler's). In a run over several
     * processes they all stop after the step at whose end they agree (ProcessGroup.agreeToStop).
     */
    public void requestStop(String why) {
        if (executor.agreesOnStops()) {
            stopSignalled = why;        // every process must stop at the same step boundary
        } else {
            stopRequestedBy = why;
        }
    }

    /** Runs the next step and reports it. */
    public StepResult step() {
        int step = completedSteps + 1;
        try {
            return runStep();
        } catch (RuntimeException | Error e) {
            RuntimeException saveFailed = saveFailureBehind(e, step);
            if (saveFailed != null) {
                throw saveFailed;
            }
            throw e;
        }
    }

    /**
     * In a run over several processes, a step that fails while a save is in flight usually fails
     * because of what ended the save (a process that died in it): the save's failure, which names
     * that process and the save, is reported then, with the step's failure {@code e} as suppressed.
     * Null when there is no such failure.
     */
    private RuntimeException saveFailureBehind(Throwable e, int step) {
        if (checkpointer == null || !executor.agreesOnStops()) {
            return null;
        }
        java.util.Optional<RuntimeException> saveFailed = checkpointer.failureOfSaveInFlight(config.fsdp().collectiveTimeout());
        if (saveFailed.isEmpty()) {
            return null;
        }
        RuntimeException s = saveFailed.get();
        s.addSuppressed(e);
        synchronized (this) {
            failure = "step " + step + ": " + s;
        }
        return s;
    }

    private StepResult runStep() {
        if (!hasNextStep()) {
            throw new IllegalStateException(watch.divergence().isPresent() ? "the run diverged at step "
                    + watch.divergence().get().step() : failure != null ? "the run failed at " + failure
                    : stopRequestedBy != null ? "the run was stopped (" + stopRequestedBy + ")"
                    : "all " + config.steps() + " steps have run");
        }
        int step = completedSteps + 1;
        float lr = schedule.lr(step);
        var batch = stream != null ? stream.next() : sampler.sample(step);
        trackers.forEach(MemoryTracker::resetPeak);
        hostTrackers.forEach(MemoryTracker::resetPeak);
        boolean firstHere = memoryCheck == null;
        if (firstHere) {
            trackers.forEach(t -> t.startTimeline(TIMELINE_EVENTS));
        }
        long start = System.nanoTime();
        StepMetrics outcome;
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
            outcome = new StepMetrics(Float.NaN, Double.NaN, true, 0f, 0, 0, sentBytesPerRank);
        }
        double timeMs = (System.nanoTime() - start) / 1e6;
        if (firstHere) {
            List<List<long[]>> timelines = trackers.stream().map(MemoryTracker::stopTimeline).toList();
            synchronized (this) {
                memoryTimelines = timelines;
            }
        }
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
        if (memoryCheck == null) {
            long[] persistentNow = new long[trackers.size()];
            long[] peakNow = new long[trackers.size()];
            for (int r = 0; r < trackers.size(); r++) {
                persistentNow[r] = trackers.get(r).persistentBytes();
                peakNow[r] = trackers.get(r).peakBytes();
            }
            synchronized (this) {
                memoryCheck = new MemoryCheck(predicted.persistentBytesPerRank(), predicted.peakBytesPerRank(),
                        predicted.temporaryBytesPerRank(), predicted.activationBytesPerRank(), persistentNow, peakNow);
            }
        }
        Float valLoss = validation != null && config.evaluatesAfter(step) ? validationLoss(step) : null;
        if (checkpointer != null && checkpoints.saveEvery() > 0 && step % checkpoints.saveEvery() == 0) {
            saveCheckpoint();
        }
        sentBytesPerRank = outcome.sentBytesPerRank();
        StepFigures figures = new StepFigures(live, peak, peakSplit, Arrays.stream(sentBytesPerRank).max()
                .orElse(0), outcome.hostSyncs(), outcome.promotedCopies(), firstHere ? memoryCheck.measuredPersistentBytesPerRank()
                : null, firstHere ? memoryCheck.measuredPeakBytesPerRank() : null);
        if (executor.agreesOnStops()) {
            figures = endStepWithTheOthers(step, figures, firstHere);
        }
        return new StepResult(step, config.steps(), outcome.loss(), outcome.gradNorm(), lr, timeMs,
                config.tokensPerStep() / (timeMs / 1e3), figures.liveBytes(), figures.peakBytes(), figures.peakSplit(),
                outcome.skipped(), figures.commBytes(), figures.hostSyncs(), figures.promotedCopies(), valLoss);
    }

    /**
     * The end of a step in a run over several processes: every process votes on stopping (all
     * stop after the same step), and process 0 gets the whole run's figures where they are
     * pooled (JobFigures says when): returns what the step reports, this process's {@code mine} otherwise.
     */
    private StepFigures endStepWithTheOthers(int step, StepFigures mine, boolean firstHere) {
        JobFigures.StepEnd end = jobFigures().stepEnd(step, step == config.steps(), stopSignalled, mine, firstHere);
        if (end.stopReason() != null && step < config.steps()) {
            stopRequestedBy = end.stopReason();
        }
        if (end.wholeRun() == null) {
            return mine;
        }
        if (firstHere) {
            synchronized (this) {
                wholeRunMemoryCheck = new MemoryCheck(predicted.persistentBytesPerRank(), predicted.peakBytesPerRank(),
                        predicted.temporaryBytesPerRank(), predicted.activationBytesPerRank(),
                        end.wholeRun().persistentBytesPerRank(), end.wholeRun().peakBytesPerRank());
            }
        }
        // the step lines and metrics.jsonl show every rank's figures when process 0 has them for every
        // step (it writes metrics): not the first step's alone, so that the lines compare with each other
        return config.outDir().isPresent() ? end.wholeRun() : mine;
    }

    /** How this process pools figures with the others (a run over several processes). */
    private JobFigures jobFigures() {
        if (jobFigures == null) {
            jobFigures = new JobFigures(executor.processGroup().orElseThrow(), config.outDir().isPresent());
        }
        return jobFigures;
    }

    /**
     * Runs the remaining steps, handing each result to {@code onStep}, and returns the summary:
     * of every planned step, or of those before a stop request or up to a non-finite step.
     */
    public TrainSummary run(Consumer<StepResult> onStep) {
        while (hasNextStep()) {
            onStep.accept(step());
        }
        poolFiguresOfEveryProcess();
        return summary();
    }

    /**
     * In a run over several processes, which all reach the end of run() after the same step:
     * every process's per-rank figures, for the summary. A process that died fails it at once.
     */
    private void poolFiguresOfEveryProcess() {
        if (!executor.agreesOnStops() || wholeRunFigures != null) {
            return;
        }
        RankFigures mine;
        synchronized (this) {
            mine = figuresOfThisProcess();
        }
        try {
            RankFigures all = jobFigures().gather(mine);
            synchronized (this) {
                wholeRunFigures = all;
            }
        } catch (RuntimeException e) {
            synchronized (this) {
                failure = "the end of the run, pooling the processes' figures: " + e;   // the summary is this process's
            }
            throw e;
        }
    }

    /**
     * Saves a checkpoint of the steps completed: every rank's state is copied to the host here
     * (the step boundary is blocked for that, and for a previous save still being written), and
     * written on the checkpointer's thread. No-op without --save-dir or when this step is saved.
     */
    public void saveCheckpoint() {
        if (checkpointer == null || completedSteps == lastSavedStep || completedSteps == 0) {
            return;
        }
        long t0 = System.nanoTime();
        ShardedStateDict state = executor.shardedState();
        double copyMs = (System.nanoTime() - t0) / 1e6;
        ShardedStateDict.Progress progress = state.progress();
        CheckpointIndex header;
        synchronized (this) {
            header = new CheckpointIndex(CheckpointIndex.FORMAT, CheckpointIndex.FORMAT_VERSION, completedSteps,
                    config.model().hf(), config.preset(), config.fsdp().strategy().cliName(), config.fsdp().worldSize(),
                    config.fsdp().shardSize(), config.fsdp().precision().paramDtype().shortName(),
                    config.fsdp().precision().reduceDtype().shortName(), "fp32", state.bufferNames(),
                    new CheckpointIndex.OptimizerState("adamw", progress.optimizerSteps(), config.fsdp().lr(),
                            config.fsdp().beta1(), config.fsdp().beta2(), config.fsdp().eps(), config.fsdp().weightDecay()),
                    new CheckpointIndex.LossScalerState(progress.lossScale(), progress.lossScaleGoodSteps()),
                    new CheckpointIndex.DataPosition(config.fsdp().seed(), config.batchSize(), config.seqLen(),
                            completedSteps + 1, config.steps(), stream != null ? stream.position() : null),
                    Arrays.copyOf(losses, completedSteps), List.of(), List.of(), List.of());
        }
        checkpointer.save(header, state, copyMs);
        lastSavedStep = completedSteps;
    }

    /**
     * After a stop request (SIGTERM: preemption), saves the steps done unless that step is saved
     * already, and waits for every write. Returns whether a checkpoint of the last completed step exists.
     */
    public boolean saveAtStop() {
        if (checkpointer == null) {
            return false;
        }
        saveCheckpoint();
        checkpointer.awaitPending();
        return lastSavedStep == completedSteps && completedSteps > 0;
    }

    /** Waits for a checkpoint still being written (a failed write is rethrown). */
    public void awaitCheckpoints() {
        if (checkpointer != null) {
            checkpointer.awaitPending();
        }
    }

    /**
     * The planner's prediction beside the first step's measured memory (on process 0 of a run
     * over several processes, of every rank); empty before a step ran.
     */
    public synchronized java.util.Optional<MemoryCheck> memoryCheck() {
        return java.util.Optional.ofNullable(wholeRunMemoryCheck != null ? wholeRunMemoryCheck : memoryCheck);
    }

    /**
     * Per rank, the live bytes per category at every allocation and free of the first step this
     * process ran: [System.nanoTime(), bytes of each MemoryCategory]; empty before a step ran.
     */
    public synchronized List<List<long[]>> memoryTimelines() {
        return memoryTimelines;
    }

    /** Where this run resumed from; empty for a fresh run. */
    public java.util.Optional<ResumedFrom> resumedFrom() {
        return java.util.Optional.ofNullable(resumedFrom);
    }

    /**
     * The summary of the steps run so far (none yet: NaN times and losses, written as null). In a
     * run over several processes its per-rank arrays hold every rank once run() has reached its
     * end; before that (a failed run) they hold this process's ranks, which ranksInPerRankArrays names.
     */
    public synchronized TrainSummary summary() {
        float[] done = Arrays.copyOf(losses, completedSteps);
        double[] times = Arrays.copyOf(stepTimesMs, completedSteps);
        double[] timed = Arrays.stream(times).filter(t -> !Double.isNaN(t)).toArray();   // this process's steps
        double medianMs = timed.length == 0 ? Double.NaN : Stats.median(timed);
        double totalMs = 0;
        for (double t : timed) {
            totalMs += t;
        }
        RankFigures ranks = wholeRunFigures != null ? wholeRunFigures : figuresOfThisProcess();
        MemoryCheck check = memoryCheck == null || ranks.measuredPeakBytesPerRank() == null ? memoryCheck
                : new MemoryCheck(memoryCheck.predictedPersistentBytes(), memoryCheck.predictedPeakBytes(),
                        memoryCheck.predictedUnitBufferBytes(), memoryCheck.predictedActivationBytes(),
                        ranks.measuredPersistentBytesPerRank(), ranks.measuredPeakBytesPerRank());
        Double floor = info.lossFloorNats().isPresent() ? info.lossFloorNats().getAsDouble() : null;
        return new TrainSummary(config.model().family().cliName(), config.preset(), info.parameters(), info.worldSize(), info.device(),
                info.backendName(), info.data(), completedSteps, config.batchSize(), config.seqLen(), config.fsdp().seed(),
                floor, done, completedSteps == 0 ? Float.NaN : done[completedSteps - 1],
                completedSteps == 0 ? Double.NaN : Stats.tailMean(done, TAIL_STEPS), medianMs,
                config.tokensPerStep() / (medianMs / 1e3), totalMs / 1e3, ranks.persistentBytesPerRank(),
                ranks.peakBytesPerRank(), ranks.peakBytesByCategory(), ranks.bytesAtPeakByCategory(),
                config.fsdp().strategy().cliName(), config.fsdp().precision().paramDtype().shortName(),
                config.fsdp().precision().reduceDtype().shortName(), config.fsdp().microBatches(), executor.paddedParameterCount(),
                ranks.commBytesPerRank(),
                info.gatherSchedule().map(ShardingInfo.GatherSchedule::name).orElse(null),
                info.gatherSchedule().map(ShardingInfo.GatherSchedule::budgetBytes).orElse(null),
                ranks.hostPersistentBytesPerRank(), ranks.hostPeakBytesPerRank(), ranks.hostSyncsPerStep(),
                ranks.promotedCopies(), config.fsdp().debugStreams(), outcome(), resumedFrom,
                checkpointer == null ? null : checkpointer.saves(), check,
                ranks.ranks() == info.worldSize() ? null : ranks.globalRanks(),
                validation == null ? null : List.copyOf(valLosses),
                valLosses.isEmpty() ? null : valLosses.get(valLosses.size() - 1).valLoss());
    }

    /** The per-rank figures of this process's ranks (all of them in a run of one process). */
    private RankFigures figuresOfThisProcess() {
        long[] persistent = new long[trackers.size()];
        for (int r = 0; r < trackers.size(); r++) {
            persistent[r] = trackers.get(r).persistentBytes();
        }
        Map<String, long[]> byCategory = new LinkedHashMap<>();
        peakBytesByCategory.forEach((c, perRank) -> byCategory.put(c.label(), perRank.clone()));
        Map<String, long[]> atPeak = new LinkedHashMap<>();
        atPeakBytesByCategory.forEach((c, perRank) -> atPeak.put(c.label(), perRank.clone()));
        int firstRank = executor.processGroup().map(g -> g.identity().rank() * (info.worldSize() / g.identity().count()))
                .orElse(0);
        return new RankFigures(firstRank, persistent, peakBytesPerRank.clone(), byCategory, atPeak,
                sentBytesPerRank.clone(),
                hostTrackers.isEmpty() ? null : hostTrackers.stream().mapToLong(MemoryTracker::persistentBytes).toArray(),
                hostTrackers.isEmpty() ? null : hostPeakBytesPerRank.clone(),
                memoryCheck == null ? null : memoryCheck.measuredPersistentBytesPerRank(),
                memoryCheck == null ? null : memoryCheck.measuredPeakBytesPerRank(), hostSyncsPerStep, promotedCopies);
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

    /** Waits for a checkpoint being written, then closes the ranks. */
    @Override
    public void close() {
        try {
            if (checkpointer != null) {
                checkpointer.close();
            }
        } finally {
            executor.close();
        }
    }
}
