// Everything a training run is asked to do, validated once. The command line maps its flags
// onto this record (through the builder, which holds the defaults), and the API takes the same
// record, so there is one configuration path. The sharding and precision options are checked
// by building the engine's FsdpOptions from them (fsdp()), so both say the same thing.
package org.fsdp4j.train;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.backend.cpu.CpuBackendProvider;
import org.fsdp4j.model.ModelConfig;
import org.fsdp4j.model.ModelFamily;
import org.fsdp4j.plan.PlanInput;

/**
 * @param preset                name of the model preset ("tiny", ...) within the model's family, for logs and summaries
 * @param model                 the model shape (the preset's), whose family (gpt, llama) the run builds
 * @param steps                 optimizer steps to run
 * @param seed                  seeds the parameters and the batches
 * @param batchSize             sequences per global batch (B)
 * @param seqLen                tokens per sequence (T), at most the model's maxSeqLen
 * @param lr                    peak learning rate, reached at the end of warm-up
 * @param minLr                 learning rate at the end of the cosine decay
 * @param warmupSteps           steps of linear warm-up from 0 to lr
 * @param weightDecay           AdamW decoupled weight decay on 2-D weights
 * @param maxGradNorm           clip the global gradient norm to this; 0 turns clipping off
 * @param checkpointActivations recompute each block's activations in backward instead of keeping them
 * @param device                auto, cpu, cuda or cuda:i, as asked (resolved when the run starts)
 * @param cpuThreads            host threads the CPU backend may use; 0 = all cores
 * @param dataFile              train on this file's bytes; empty = the embedded Markov source
 * @param outDir                where summary.json goes; empty = nowhere
 * @param initFrom              pretrained weights the parameters start from (a .safetensors file or a
 *                              Hugging Face model directory); empty = the seed's initialisation
 * @param worldSize             ranks N (in-process threads on the CPU backend)
 * @param strategy              what is sharded across the ranks
 * @param shardGroupSize        S for hybrid_shard; 0 for every other strategy
 * @param precision             param and reduce dtypes (masters are always fp32)
 * @param prefetch              units all-gathered ahead of the one running
 * @param microBatches          forward/backward passes per step (gradient accumulation)
 * @param offload               keep master shard, gradient shard and optimizer state on the host
 * @param debugStreams          run every CPU stream on its own worker with random delays and poison freed
 *                              memory, so that missing stream orderings show up (see BackendOptions)
 * @param onNonFinite           what a step with an inf/NaN loss or gradient norm does to the run
 * @param collectiveTimeout     how long a rank waits for the others in one collective before the run is
 *                              aborted (the watchdog), and for the other processes at start
 */
public record TrainConfig(String preset, ModelConfig model, int steps, long seed, int batchSize, int seqLen,
                          float lr, float minLr, int warmupSteps, float weightDecay, float maxGradNorm,
                          boolean checkpointActivations, String device, int cpuThreads,
                          Optional<Path> dataFile, Optional<Path> outDir, Optional<Path> initFrom,
                          int worldSize, ShardingStrategy strategy, int shardGroupSize, MixedPrecisionPolicy precision,
                          int prefetch, int microBatches, boolean offload, boolean debugStreams,
                          NonFinitePolicy onNonFinite, Duration collectiveTimeout) {

    public TrainConfig {
        if (preset == null || model == null || device == null || dataFile == null || outDir == null || initFrom == null) {
            throw new IllegalArgumentException("preset, model, device, dataFile, outDir and initFrom must be given"
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
        if (!(lr > 0) || !Float.isFinite(lr)) {
            throw new IllegalArgumentException("--lr must be a positive number, got " + typed(lr));
        }
        if (!(minLr >= 0) || minLr > lr) {
            throw new IllegalArgumentException("--min-lr must be between 0 and --lr (" + typed(lr) + "), got " + typed(minLr));
        }
        if (warmupSteps < 0 || warmupSteps > steps) {
            throw new IllegalArgumentException("--warmup-steps must be between 0 and --steps (" + steps + "), got "
                    + warmupSteps);
        }
        if (!(weightDecay >= 0) || !Float.isFinite(weightDecay)) {
            throw new IllegalArgumentException("--weight-decay must be >= 0, got " + typed(weightDecay));
        }
        if (!(maxGradNorm >= 0) || !Float.isFinite(maxGradNorm)) {
            throw new IllegalArgumentException("--max-grad-norm must be >= 0 (0 turns clipping off), got "
                    + typed(maxGradNorm));
        }
        if (cpuThreads < 0 || cpuThreads > CpuBackendProvider.MAX_THREADS) {
            throw new IllegalArgumentException("--cpu-threads must be between 0 (all cores) and "
                    + CpuBackendProvider.MAX_THREADS + ", got " + cpuThreads);
        }
        if (onNonFinite == null) {
            throw new IllegalArgumentException("onNonFinite must be given (NonFinitePolicy.STOP by default)");
        }
        if (collectiveTimeout == null || collectiveTimeout.compareTo(Duration.ofSeconds(1)) < 0
                || collectiveTimeout.compareTo(MAX_COLLECTIVE_TIMEOUT) > 0) {
            throw new IllegalArgumentException("--collective-timeout must be between 1 and " + MAX_COLLECTIVE_TIMEOUT.toSeconds()
                    + " seconds, got " + (collectiveTimeout == null ? "none" : collectiveTimeout.toSeconds()));
        }
        device = checkDevice(device);
        // the engine's validation is the one these flags get; then B must split into N ranks × M micro-batches
        fsdpConfig(worldSize, strategy, shardGroupSize, precision, prefetch, microBatches, offload, maxGradNorm)
                .checkBatch(batchSize);
    }

    /** The longest --collective-timeout (a day: a bound, not a policy). */
    public static final Duration MAX_COLLECTIVE_TIMEOUT = Duration.ofDays(1);

    /** The engine's view of the sharding options. */
    public FsdpOptions fsdp() {
        return fsdpConfig(worldSize, strategy, shardGroupSize, precision, prefetch, microBatches, offload, maxGradNorm)
                .toBuilder().collectiveTimeout(collectiveTimeout).build();
    }

    private static FsdpOptions fsdpConfig(int worldSize, ShardingStrategy strategy, int shardGroupSize,
                                          MixedPrecisionPolicy precision, int prefetch, int microBatches, boolean offload,
                                          float maxGradNorm) {
        return FsdpOptions.builder().worldSize(worldSize).strategy(strategy).shardGroupSize(shardGroupSize)
                .precision(precision).prefetch(prefetch).microBatches(microBatches).offload(offload)
                .maxGradNorm(maxGradNorm).build();
    }

    /** This run as the planner sees it: its N ranks on one node, no GPU spec. */
    public PlanInput planInput() {
        return new PlanInput(model, batchSize, seqLen, worldSize, 1, strategy, shardGroupSize, precision,
                checkpointActivations, offload, prefetch, microBatches, Optional.empty());
    }

    /**
     * Whether the run's sharding settings are worth reporting: anything beyond one fp32 rank with
     * full_shard, one micro-batch and no offload. Where they are not, the run log leaves out its
     * sharding line and the run's summary its gather schedule.
     */
    public boolean reportsSharding() {
        return worldSize > 1 || strategy != ShardingStrategy.FULL_SHARD || !precision.equals(MixedPrecisionPolicy.FP32)
                || microBatches > 1 || offload;
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

    /** A builder with every field set to its default, for callers that change a few. */
    public Builder toBuilder() {
        return new Builder().family(model.family()).preset(preset).model(model).steps(steps).seed(seed).batchSize(batchSize).seqLen(seqLen)
                .lr(lr).minLr(minLr).warmupSteps(warmupSteps).weightDecay(weightDecay).maxGradNorm(maxGradNorm)
                .checkpointActivations(checkpointActivations).device(device).cpuThreads(cpuThreads)
                .dataFile(dataFile.orElse(null)).outDir(outDir.orElse(null)).initFrom(initFrom.orElse(null))
                .worldSize(worldSize).strategy(strategy).shardGroupSize(shardGroupSize)
                .paramDtype(precision.paramDtype()).reduceDtype(precision.reduceDtype()).prefetch(prefetch)
                .microBatches(microBatches).offload(offload).debugStreams(debugStreams).onNonFinite(onNonFinite)
                .collectiveTimeout(collectiveTimeout);
    }

    /**
     * Holds the defaults. Fields left unset that depend on others are derived in build():
     * the model from the family's preset, seqLen = the model's context, minLr = lr / 10, warm-up = 5% of
     * the steps (at least 1), as nanoGPT schedules.
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

        private ModelFamily family = ModelFamily.GPT;
        private String preset = DEFAULT_PRESET;
        private ModelConfig model;
        private int steps = DEFAULT_STEPS;
        private long seed = DEFAULT_SEED;
        private int batchSize = DEFAULT_BATCH_SIZE;
        private Integer seqLen;
        private float lr = DEFAULT_LR;
        private Float minLr;
        private Integer warmupSteps;
        private float weightDecay = DEFAULT_WEIGHT_DECAY;
        private float maxGradNorm = DEFAULT_MAX_GRAD_NORM;
        private boolean checkpointActivations;
        private String device = DEFAULT_DEVICE;
        private int cpuThreads;
        private Path dataFile;
        private Path initFrom;
        private Path outDir;
        private int worldSize = 1;
        private ShardingStrategy strategy = ShardingStrategy.FULL_SHARD;
        private int shardGroupSize;
        private DType paramDtype = DType.F32;
        private DType reduceDtype = DType.F32;
        private int prefetch = 1;
        private int microBatches = 1;
        private boolean offload;
        private boolean debugStreams = Boolean.getBoolean(org.fsdp4j.backend.BackendOptions.DEBUG_STREAMS_PROPERTY);
        private NonFinitePolicy onNonFinite = NonFinitePolicy.STOP;
        private Duration collectiveTimeout = DEFAULT_COLLECTIVE_TIMEOUT;

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

        public Builder steps(int v) {
            this.steps = v;
            return this;
        }

        public Builder seed(long v) {
            this.seed = v;
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

        public Builder lr(float v) {
            this.lr = v;
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

        public Builder weightDecay(float v) {
            this.weightDecay = v;
            return this;
        }

        public Builder maxGradNorm(float v) {
            this.maxGradNorm = v;
            return this;
        }

        public Builder checkpointActivations(boolean v) {
            this.checkpointActivations = v;
            return this;
        }

        public Builder device(String v) {
            this.device = v;
            return this;
        }

        public Builder cpuThreads(int v) {
            this.cpuThreads = v;
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
        public Builder initFrom(Path v) {
            this.initFrom = v;
            return this;
        }

        public Builder worldSize(int v) {
            this.worldSize = v;
            return this;
        }

        public Builder strategy(ShardingStrategy v) {
            this.strategy = v;
            return this;
        }

        /** 0 for every strategy but hybrid_shard. */
        public Builder shardGroupSize(int v) {
            this.shardGroupSize = v;
            return this;
        }

        public Builder paramDtype(DType v) {
            this.paramDtype = v;
            return this;
        }

        public Builder reduceDtype(DType v) {
            this.reduceDtype = v;
            return this;
        }

        public Builder prefetch(int v) {
            this.prefetch = v;
            return this;
        }

        public Builder microBatches(int v) {
            this.microBatches = v;
            return this;
        }

        public Builder offload(boolean v) {
            this.offload = v;
            return this;
        }

        public Builder debugStreams(boolean v) {
            this.debugStreams = v;
            return this;
        }

        /** How long a rank waits for the others in one collective (the watchdog); default 600 s. */
        public Builder collectiveTimeout(Duration v) {
            this.collectiveTimeout = v;
            return this;
        }

        public Builder onNonFinite(NonFinitePolicy v) {
            this.onNonFinite = v;
            return this;
        }

        public TrainConfig build() {
            ModelConfig m = model != null ? model : family.preset(preset);
            int t = seqLen != null ? seqLen : m.maxSeqLen();
            float floorLr = minLr != null ? minLr : lr / 10;
            int warmup = warmupSteps != null ? warmupSteps : Math.min(steps, Math.max(1, Math.round(steps * 0.05f)));
            return new TrainConfig(preset, m, steps, seed, batchSize, t, lr, floorLr, warmup,
                    weightDecay, maxGradNorm, checkpointActivations, device, cpuThreads,
                    Optional.ofNullable(dataFile), Optional.ofNullable(outDir), Optional.ofNullable(initFrom), worldSize, strategy, shardGroupSize,
                    new MixedPrecisionPolicy(paramDtype, reduceDtype), prefetch, microBatches, offload, debugStreams,
                    onNonFinite, collectiveTimeout);
        }
    }
}
