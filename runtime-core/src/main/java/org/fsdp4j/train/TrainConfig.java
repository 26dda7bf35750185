// Everything a training run is asked to do, validated once. The sharding, precision and
// optimizer options are the API's FsdpOptions, held whole (the engine runs on that object), so
// a knob is added there and as one CLI flag; this record keeps what training adds: the model,
// the steps, the learning-rate schedule, the data, where reports go and what a non-finite step
// does. The command line maps each flag onto one builder setter; the builder holds the defaults.
package org.fsdp4j.train;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.backend.cpu.CpuBackendProvider;
import org.fsdp4j.model.ModelConfig;
import org.fsdp4j.model.ModelFamily;
import org.fsdp4j.plan.PlanInput;

/**
 * @param preset      name of the model preset ("tiny", ...) within the model's family, for logs and summaries
 * @param model       the model shape (the preset's), whose family (gpt, llama) the run builds
 * @param steps       optimizer steps to run
 * @param batchSize   sequences per global batch (B)
 * @param seqLen      tokens per sequence (T), at most the model's maxSeqLen
 * @param minLr       learning rate at the end of the cosine decay (the peak, reached at the end of warm-up, is
 *                    the options' lr)
 * @param warmupSteps steps of linear warm-up from 0 to the peak learning rate
 * @param dataFile    train on this file's bytes (its tokens, with a tokenizer), or on a folder's token shards
 *                    (train_*.bin, as fsdp4j data tokenize writes them); empty = the embedded Markov source
 * @param tokenizer   the Hugging Face tokenizer.json (or its folder) a data file is tokenized with, and whose
 *                    vocabulary a shard folder's tokens come from; empty = bytes, or shards taken as they are
 * @param outDir      where summary.json goes; empty = nowhere
 * @param initFrom    pretrained weights the parameters start from (a .safetensors file or a
 *                    Hugging Face model directory); empty = the seed's initialisation
 * @param onNonFinite what a step with an inf/NaN loss or gradient norm does to the run
 * @param fsdp        how the model is sharded and trained: ranks, strategy, precision, prefetch, micro-batches,
 *                    offload, AdamW, clipping, the seed (of the parameters and the batches), the device as asked
 *                    (auto, cpu, cuda or cuda:i, normalised), host threads, the collective timeout (the watchdog,
 *                    and how long processes wait for each other at start)
 * @param evalEvery   measure the validation loss on the held-out split after every evalEvery-th step
 *                    (step % evalEvery == 0); 0 = never
 * @param evalBatches global batches each validation loss averages over (the same ones every time); 0 when
 *                    evalEvery is 0
 */
public record TrainConfig(String preset, ModelConfig model, int steps, int batchSize, int seqLen,
                          float minLr, int warmupSteps, Optional<Path> dataFile, Optional<Path> tokenizer,
                          Optional<Path> outDir, Optional<Path> initFrom, NonFinitePolicy onNonFinite, FsdpOptions fsdp,
                          int evalEvery, int evalBatches) {

    public TrainConfig {
        if (preset == null || model == null || fsdp == null || dataFile == null || tokenizer == null || outDir == null
                || initFrom == null) {
            throw new IllegalArgumentException("preset, model, fsdp, dataFile, tokenizer, outDir and initFrom must be given"
                    + " (Optional.empty() for none)");
        }
        if (steps < 1) {
            throw new IllegalArgumentException("--steps must be at least 1, got " + steps);
        }
        if (batchSize < 1) {
            throw new IllegalArgumentException("--batch-size must be at least 1, got " + batchSize);
        }
        if ((long) batchSize * Math.max(seqLen, 1) > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("--batch-size " + batchSize + " x --seq-len " + seqLen + " = "
                    + (long) batchSize * seqLen + " tokens per step; at most " + Integer.MAX_VALUE
                    + " are supported: lower --batch-size");
        }
        if (seqLen < 1) {
            throw new IllegalArgumentException("--seq-len must be at least 1, got " + seqLen);
        }
        if (seqLen > model.maxSeqLen()) {
            throw new IllegalArgumentException("--seq-len " + seqLen + " is longer than the " + preset
                    + " model's context of " + model.maxSeqLen() + ": use --seq-len " + model.maxSeqLen()
                    + " or less, or a preset with a longer context");
        }
        float lr = fsdp.lr();
        checkFlags(lr, fsdp.maxGradNorm(), fsdp.cpuThreads(), fsdp.collectiveTimeout());
        if (!(minLr >= 0) || minLr > lr) {
            throw new IllegalArgumentException("--min-lr must be between 0 and --lr (" + typed(lr) + "), got " + typed(minLr));
        }
        if (warmupSteps < 0 || warmupSteps > steps) {
            throw new IllegalArgumentException("--warmup-steps must be between 0 and --steps (" + steps + "), got "
                    + warmupSteps);
        }
        if (!(fsdp.weightDecay() >= 0) || !Float.isFinite(fsdp.weightDecay())) {
            throw new IllegalArgumentException("--weight-decay must be >= 0, got " + typed(fsdp.weightDecay()));
        }
        if (onNonFinite == null) {
            throw new IllegalArgumentException("onNonFinite must be given (NonFinitePolicy.STOP by default)");
        }
        String device = checkDevice(fsdp.device());
        if (!device.equals(fsdp.device())) {
            fsdp = fsdp.toBuilder().device(device).build();
        }
        fsdp.checkBatch(batchSize);        // B must split into N ranks × M micro-batches
        if (evalEvery < 0) {
            throw new IllegalArgumentException("--eval-every must be at least 0 (0 measures no validation loss), got "
                    + evalEvery);
        }
        if (evalEvery == 0 && evalBatches != 0) {
            throw new IllegalArgumentException("--eval-batches " + evalBatches + " needs --eval-every K: the validation"
                    + " loss is measured only every K steps");
        }
        if (evalEvery > 0 && evalBatches < 1) {
            throw new IllegalArgumentException("--eval-batches must be at least 1, got " + evalBatches);
        }
    }

    /** Whether step {@code step} (counting from 1) ends with a validation loss. */
    public boolean evaluatesAfter(int step) {
        return evalEvery > 0 && step % evalEvery == 0;
    }

    /**
     * The checks of the values FsdpOptions also checks, with the messages that name the flags: the
     * builder makes them before the options are built, so the command line's user sees these.
     */
    private static void checkFlags(float lr, float maxGradNorm, int cpuThreads, Duration collectiveTimeout) {
        if (!(lr > 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("--lr must be a positive number, got " + typed(lr));
        }
        if (!(maxGradNorm >= 0) || !Float.isFinite(maxGradNorm)) {
            throw new IllegalArgumentException("--max-grad-norm must be >= 0 (0 turns clipping off), got "
                    + typed(maxGradNorm));
        }
        if (cpuThreads < 0 || cpuThreads > CpuBackendProvider.MAX_THREADS) {
            throw new IllegalArgumentException("--cpu-threads must be between 0 (all cores) and "
                    + CpuBackendProvider.MAX_THREADS + ", got " + cpuThreads);
        }
        if (collectiveTimeout == null || collectiveTimeout.compareTo(Duration.ofSeconds(1)) < 0
                || collectiveTimeout.compareTo(MAX_COLLECTIVE_TIMEOUT) > 0) {
            throw new IllegalArgumentException("--collective-timeout must be between 1 and " + MAX_COLLECTIVE_TIMEOUT.toSeconds()
                    + " seconds, got " + (collectiveTimeout == null ? "none" : collectiveTimeout.toSeconds()));
        }
    }

    /** The longest --collective-timeout (a day: a bound, not a policy). */
    public static final Duration MAX_COLLECTIVE_TIMEOUT = Duration.ofDays(1);

    /** This run as the planner sees it: its N ranks on one node, no GPU spec. */
    public PlanInput planInput() {
        return new PlanInput(model, batchSize, seqLen, fsdp.worldSize(), 1, fsdp.strategy(), fsdp.shardGroupSize(),
                fsdp.precision(), fsdp.activationCheckpointing(), fsdp.offload(), fsdp.prefetch(), fsdp.microBatches(),
                Optional.empty());
    }

    /**
     * Whether the run's sharding settings are worth reporting: anything beyond one fp32 rank with
     * full_shard, one micro-batch and no offload. Where they are not, the run log leaves out its
     * sharding line and the run's summary its gather schedule.
     */
    public boolean reportsSharding() {
        return fsdp.worldSize() > 1 || fsdp.strategy() != ShardingStrategy.FULL_SHARD
                || !fsdp.precision().equals(MixedPrecisionPolicy.FP32) || fsdp.microBatches() > 1 || fsdp.offload();
    }

    /** "auto" or a device Device.parse accepts, normalised to lower case. */
    private static String checkDevice(String device) {
        String d = device.trim().toLowerCase(Locale.ROOT);
        if (d.equals("auto") || d.equals("cuda")) {   // "cuda": every visible GPU, one rank each (RankPlacement)
            return d;
        }
        try {
            return Device.parse(d).toString();
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown device '" + device + "': use --device auto, cpu, cuda or cuda:<index>");
        }
    }

    /** Tokens per step: B·T. */
    public long tokensPerStep() {
        return (long) batchSize * seqLen;
    }

    /** A float flag's value as the user typed it (1e-5, 0.001), not Float.toString's 1.0E-5 or 1.00000005E-4. */
    private static String typed(float x) {
        return Float.isFinite(x) && x != 0
                ? org.fsdp4j.model.HfModelConfig.plain(Double.parseDouble(String.format(java.util.Locale.ROOT, "%.5e", x)))
                : String.valueOf(x);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding every value of this, for callers that change a few. */
    public Builder toBuilder() {
        Builder b = new Builder().family(model.family()).preset(preset).model(model).steps(steps).batchSize(batchSize)
                .seqLen(seqLen).minLr(minLr).warmupSteps(warmupSteps).dataFile(dataFile.orElse(null))
                .tokenizer(tokenizer.orElse(null))
                .outDir(outDir.orElse(null)).initFrom(initFrom.orElse(null)).onNonFinite(onNonFinite)
                .evalEvery(evalEvery).evalBatches(evalEvery == 0 ? null : evalBatches);
        b.fsdp = fsdp.toBuilder();
        return b;
    }

    /**
     * Holds the defaults. Fields left unset that depend on others are derived in build():
     * the model from the family's preset, seqLen = the model's context, minLr = lr / 10, warm-up = 5% of
     * the steps (at least 1), as nanoGPT schedules. The sharding options start from the API's
     * defaults but for the trainer's own (below) and AdamW's betas, GPT-2's.
     */
    public static final class Builder {
        public static final String DEFAULT_PRESET = "tiny";
        public static final int DEFAULT_STEPS = 300;
        public static final long DEFAULT_SEED = 1337;
        public static final int DEFAULT_BATCH_SIZE = 8;
        public static final float DEFAULT_LR = 1e-3f;
        public static final float DEFAULT_WEIGHT_DECAY = 0.1f;
        public static final float DEFAULT_MAX_GRAD_NORM = 1.0f;
        public static final String DEFAULT_DEVICE = "auto";
        public static final Duration DEFAULT_COLLECTIVE_TIMEOUT = Duration.ofSeconds(600);
        /** Global batches a validation loss averages over when --eval-every is given without --eval-batches. */
        public static final int DEFAULT_EVAL_BATCHES = 8;
        /** Adam's betas and eps: GPT-2/nanoGPT's. */
        public static final float BETA1 = 0.9f;
        public static final float BETA2 = 0.95f;
        public static final float EPS = 1e-8f;

        private ModelFamily family = ModelFamily.GPT;
        private String preset = DEFAULT_PRESET;
        private ModelConfig model;
        private int steps = DEFAULT_STEPS;
        private int batchSize = DEFAULT_BATCH_SIZE;
        private Integer seqLen;
        private Float minLr;
        private Integer warmupSteps;
        private Path dataFile;
        private Path tokenizer;
        private Path initFrom;
        private Path outDir;
        private NonFinitePolicy onNonFinite = NonFinitePolicy.STOP;
        private int evalEvery;
        private Integer evalBatches;
        private FsdpOptions.Builder fsdp = FsdpOptions.builder().device(DEFAULT_DEVICE).seed(DEFAULT_SEED)
                .adamW(DEFAULT_LR, BETA1, BETA2, EPS, DEFAULT_WEIGHT_DECAY).maxGradNorm(DEFAULT_MAX_GRAD_NORM)
                .collectiveTimeout(DEFAULT_COLLECTIVE_TIMEOUT)
                .debugStreams(org.fsdp4j.backend.Fsdp4jSystemProperties.debugStreams());

        private Builder() {
        }

        /** The model family whose presets preset() names (gpt unless given). */
        public Builder family(ModelFamily f) {
            this.family = f;
            return this;
        }

        /** A named preset of the family; the model shape follows unless model() is also given. */
        public Builder preset(String name) {
            this.preset = name;
            return this;
        }

        /** The preset's name as set so far (callers derive a model shape from it). */
        public String presetName() {
            return preset;
        }

        /** An explicit model shape (overrides the preset's and the family's). */
        public Builder model(ModelConfig config) {
            this.model = config;
            return this;
        }

        /**
         * Sets sharding, precision, optimizer, seed, device and thread options on the run's
         * FsdpOptions builder: {@code fsdp(f -> f.worldSize(4).prefetch(2))}.
         */
        public Builder fsdp(UnaryOperator<FsdpOptions.Builder> change) {
            this.fsdp = change.apply(fsdp);
            return this;
        }

        public Builder steps(int v) {
            this.steps = v;
            return this;
        }

        public Builder batchSize(int v) {
            this.batchSize = v;
            return this;
        }

        /** Null: the model's context length. */
        public Builder seqLen(Integer v) {
            this.seqLen = v;
            return this;
        }

        /** Null: lr / 10. */
        public Builder minLr(Float v) {
            this.minLr = v;
            return this;
        }

        /** Null: 5% of the steps, at least 1. */
        public Builder warmupSteps(Integer v) {
            this.warmupSteps = v;
            return this;
        }

        /** Null: the embedded default data. */
        public Builder dataFile(Path v) {
            this.dataFile = v;
            return this;
        }

        /** Null: write no summary. */
        public Builder outDir(Path v) {
            this.outDir = v;
            return this;
        }

        /** Null: start from the seed's initialisation, not from pretrained weights. */
        public Builder tokenizer(Path v) {
            this.tokenizer = v;
            return this;
        }

        public Builder initFrom(Path v) {
            this.initFrom = v;
            return this;
        }

        public Builder onNonFinite(NonFinitePolicy v) {
            this.onNonFinite = v;
            return this;
        }

        /** Every K steps the validation loss; 0 (the default): never. */
        public Builder evalEvery(int k) {
            this.evalEvery = k;
            return this;
        }

        /** Null: DEFAULT_EVAL_BATCHES when evalEvery is on, else none. */
        public Builder evalBatches(Integer m) {
            this.evalBatches = m;
            return this;
        }

        public TrainConfig build() {
            ModelConfig m = model != null ? model : family.preset(preset);
            int t = seqLen != null ? seqLen : m.maxSeqLen();
            // the values FsdpOptions checks too are checked first with the messages that name their flags
            checkFlags(fsdp.lr(), fsdp.maxGradNorm(), fsdp.cpuThreads(), fsdp.collectiveTimeout());
            FsdpOptions options = fsdp.build();
            float floorLr = minLr != null ? minLr : options.lr() / 10;
            int warmup = warmupSteps != null ? warmupSteps : Math.min(steps, Math.max(1, Math.round(steps * 0.05f)));
            return new TrainConfig(preset, m, steps, batchSize, t, floorLr, warmup, Optional.ofNullable(dataFile),
                    Optional.ofNullable(tokenizer), Optional.ofNullable(outDir), Optional.ofNullable(initFrom), onNonFinite,
                    options, evalEvery, evalBatches != null ? evalBatches : evalEvery > 0 ? DEFAULT_EVAL_BATCHES : 0);
        }
    }
}
