// How Fsdp.shard shards and trains a model: the strategy and mesh, the precision policy,
// prefetch, activation checkpointing, offload, gradient accumulation, the optimizer, clipping
// and loss scaling, and where the parameters start from (the seed, or pretrained weights).
// The one sharding configuration: the engine runs on it and the trainer's TrainConfig holds it
// whole, so a knob is added here once. Immutable; built with a builder whose defaults are PyTorch
// FSDP's where it has one, and checked by build(), with a message that names the option.
package org.fsdp4j.api;

import java.time.Duration;

/**
 * How {@link Fsdp#shard} shards and trains a model. Immutable; make one with {@link #builder()}:
 *
 * <pre>{@code
 * FsdpOptions options = FsdpOptions.builder()
 *         .worldSize(4)
 *         .strategy(ShardingStrategy.FULL_SHARD)
 *         .precision(new MixedPrecisionPolicy(DType.BF16, DType.F32))
 *         .adamW(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f)
 *         .maxGradNorm(1f)
 *         .build();
 * }</pre>
 *
 * <p>Every value is checked by {@link Builder#build()}; a bad one is an
 * {@link IllegalArgumentException} naming the option and what to change.
 */
public final class FsdpOptions {

    private final String device;
    private final int worldSize;
    private final ShardingStrategy strategy;
    private final int shardGroupSize;
    private final MixedPrecisionPolicy precision;
    private final int prefetch;
    private final int microBatches;
    private final boolean activationCheckpointing;
    private final boolean offload;
    private final float lr;
    private final float beta1;
    private final float beta2;
    private final float eps;
    private final float weightDecay;
    private final float maxGradNorm;
    private final float initialLossScale;
    private final int lossScaleGrowthInterval;
    private final long seed;
    private final ParamSource initialValues;   // null: ParamSource.seeded(seed)
    private final Duration collectiveTimeout;
    private final int cpuThreads;
    private final boolean debugStreams;

    private FsdpOptions(Builder b) {
        this.device = b.device;
        this.worldSize = b.worldSize;
        this.strategy = b.strategy;
        this.shardGroupSize = b.shardGroupSize;
        this.precision = b.precision;
        this.prefetch = b.prefetch;
        this.microBatches = b.microBatches;
        this.activationCheckpointing = b.activationCheckpointing;
        this.offload = b.offload;
        this.lr = b.lr;
        this.beta1 = b.beta1;
        this.beta2 = b.beta2;
        this.eps = b.eps;
        this.weightDecay = b.weightDecay;
        this.maxGradNorm = b.maxGradNorm;
        this.initialLossScale = b.initialLossScale;
        this.lossScaleGrowthInterval = b.lossScaleGrowthInterval;
        this.seed = b.seed;
        this.initialValues = b.initialValues;
        this.collectiveTimeout = b.collectiveTimeout;
        this.cpuThreads = b.cpuThreads;
        this.debugStreams = b.debugStreams;
    }

    /**
     * A builder holding the defaults: one rank on the CPU, FULL_SHARD, fp32, prefetch 1, one
     * micro-batch, AdamW(lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0.01) as
     * {@code torch.optim.AdamW}, no clipping, seed 0.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * A builder starting from these options.
     *
     * @return a new builder holding every value of this
     */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.device = device;
        b.worldSize = worldSize;
        b.strategy = strategy;
        b.shardGroupSize = shardGroupSize;
        b.precision = precision;
        b.prefetch = prefetch;
        b.microBatches = microBatches;
        b.activationCheckpointing = activationCheckpointing;
        b.offload = offload;
        b.lr = lr;
        b.beta1 = beta1;
        b.beta2 = beta2;
        b.eps = eps;
        b.weightDecay = weightDecay;
        b.maxGradNorm = maxGradNorm;
        b.initialLossScale = initialLossScale;
        b.lossScaleGrowthInterval = lossScaleGrowthInterval;
        b.seed = seed;
        b.initialValues = initialValues;
        b.collectiveTimeout = collectiveTimeout;
        b.cpuThreads = cpuThreads;
        b.debugStreams = debugStreams;
        return b;
    }

    /**
     * Where the ranks run (default "cpu").
     *
     * @return "cpu", "cuda" (one rank per GPU), "cuda:i" (every rank on GPU i) or "auto" (a GPU
     *         when there is one, else the CPU)
     */
    public String device() {
        return device;
    }

    /**
     * The number of ranks N over which the model is sharded (default 1).
     *
     * @return N, at least 1
     */
    public int worldSize() {
        return worldSize;
    }

    /**
     * What is sharded across the ranks (default {@link ShardingStrategy#FULL_SHARD}).
     *
     * @return the strategy
     */
    public ShardingStrategy strategy() {
        return strategy;
    }

    /**
     * The shard group size under {@link ShardingStrategy#HYBRID_SHARD}.
     *
     * @return S, the ranks each shard group holds; 0 for the other strategies
     */
    public int shardGroupSize() {
        return shardGroupSize;
    }

    /**
     * The mixed-precision policy (default {@link MixedPrecisionPolicy#FP32}); the masters are fp32 whatever it says.
     *
     * @return the dtypes parameters are gathered and gradients reduced in
     */
    public MixedPrecisionPolicy precision() {
        return precision;
    }

    /**
     * How many units are all-gathered ahead of the one running (default 1).
     *
     * @return the prefetch depth; 0 gathers on demand
     */
    public int prefetch() {
        return prefetch;
    }

    /**
     * Gradient accumulation: forward/backward passes per step (default 1); gradients are reduced after the last.
     *
     * @return passes per step, at least 1
     */
    public int microBatches() {
        return microBatches;
    }

    /**
     * Whether models are asked to recompute block internals in backward (default false); see {@link ModelContext#activationCheckpointing()}.
     *
     * @return true when models are asked to checkpoint
     */
    public boolean activationCheckpointing() {
        return activationCheckpointing;
    }

    /**
     * Whether the fp32 master shard, the gradient shard and the optimizer state live in host memory, the optimizer running on the host (default false).
     *
     * @return true when that state is offloaded
     */
    public boolean offload() {
        return offload;
    }

    /**
     * AdamW's learning rate for a step that is not given one (default 1e-3).
     *
     * @return the learning rate, a positive number
     */
    public float lr() {
        return lr;
    }

    /**
     * AdamW's β1, the first moment's decay (default 0.9).
     *
     * @return β1
     */
    public float beta1() {
        return beta1;
    }

    /**
     * AdamW's β2, the second moment's decay (default 0.999).
     *
     * @return β2
     */
    public float beta2() {
        return beta2;
    }

    /**
     * AdamW's ε, added to the second moment's square root (default 1e-8).
     *
     * @return ε
     */
    public float eps() {
        return eps;
    }

    /**
     * AdamW's decoupled weight decay (default 0.01), applied only to the parameters whose {@link ParamSpec#weightDecay()} asks for it.
     *
     * @return the decay factor
     */
    public float weightDecay() {
        return weightDecay;
    }

    /**
     * The global gradient norm (over all shards) is clipped to this before the update (default 0, no clipping).
     *
     * @return the largest norm; 0 when clipping is off
     */
    public float maxGradNorm() {
        return maxGradNorm;
    }

    /**
     * The first loss scale when the precision policy has fp16 (default 65536); unused otherwise.
     *
     * @return the initial scale
     */
    public float initialLossScale() {
        return initialLossScale;
    }

    /**
     * Finite steps in a row before the fp16 loss scale doubles (default 1000).
     *
     * @return the growth interval, in steps
     */
    public int lossScaleGrowthInterval() {
        return lossScaleGrowthInterval;
    }

    /**
     * Seeds the parameters' initialisation (default 0); each parameter's values are the same at every world size.
     *
     * @return the seed
     */
    public long seed() {
        return seed;
    }

    /**
     * Where every parameter's starting values come from: the values given to
     * {@link Builder#initialValues}, else the parameters' initialisers seeded with {@link #seed()}.
     *
     * @return the source each rank asks for the elements of its shards
     */
    public ParamSource initialValues() {
        return initialValues != null ? initialValues : ParamSource.seeded(seed);
    }

    /**
     * How long a rank waits for the others in one collective before the run fails naming the rank (default 10 minutes).
     *
     * @return the timeout
     */
    public Duration collectiveTimeout() {
        return collectiveTimeout;
    }

    /**
     * Host threads the CPU backend may use, over all ranks of this process (default 0).
     *
     * @return the thread count; 0 for all cores
     */
    public int cpuThreads() {
        return cpuThreads;
    }

    /**
     * Whether CPU streams run on their own workers with random delays and freed memory is
     * poisoned, so that a missing stream ordering shows up (slow; for tests; default false).
     *
     * @return true when debugging streams
     */
    public boolean debugStreams() {
        return debugStreams;
    }

    /**
     * The ranks a unit's flat parameter is split over.
     *
     * @return N, S for {@link ShardingStrategy#HYBRID_SHARD}, 1 for {@link ShardingStrategy#NO_SHARD}
     */
    public int shardSize() {
        switch (strategy) {
            case NO_SHARD: return 1;
            case HYBRID_SHARD: return shardGroupSize;
            default: return worldSize;
        }
    }

    /**
     * The copies of each shard across the world.
     *
     * @return N / {@link #shardSize()}
     */
    public int replicateSize() {
        return worldSize / shardSize();
    }

    /**
     * Fails unless a global batch splits into N ranks × M equal micro-batches.
     *
     * @param globalBatch samples per step, all ranks together
     * @throws IllegalArgumentException if it does not split, saying what batch or micro-batch count would
     */
    public void checkBatch(int globalBatch) {
        if (globalBatch % worldSize != 0) {
            throw new IllegalArgumentException("batch size " + globalBatch + " does not split over " + worldSize
                    + " ranks: use a multiple of " + worldSize);
        }
        int perRank = globalBatch / worldSize;
        if (microBatches > perRank) {
            throw new IllegalArgumentException("--micro-batches " + microBatches + " is more than the " + perRank
                    + (worldSize == 1 ? " samples the rank gets" : " samples each of the " + worldSize + " ranks gets")
                    + " from batch size " + globalBatch
                    + ": use at most " + perRank + " micro-batches or a larger batch");
        }
        if (perRank % microBatches != 0) {
            throw new IllegalArgumentException("the " + perRank + " samples per rank do not split into " + microBatches
                    + " equal micro-batches: use a divisor of " + perRank);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof FsdpOptions other && device.equals(other.device) && worldSize == other.worldSize
                && strategy == other.strategy && shardGroupSize == other.shardGroupSize
                && precision.equals(other.precision) && prefetch == other.prefetch && microBatches == other.microBatches
                && activationCheckpointing == other.activationCheckpointing && offload == other.offload
                && Float.compare(lr, other.lr) == 0 && Float.compare(beta1, other.beta1) == 0
                && Float.compare(beta2, other.beta2) == 0 && Float.compare(eps, other.eps) == 0
                && Float.compare(weightDecay, other.weightDecay) == 0 && Float.compare(maxGradNorm, other.maxGradNorm) == 0
                && Float.compare(initialLossScale, other.initialLossScale) == 0
                && lossScaleGrowthInterval == other.lossScaleGrowthInterval && seed == other.seed
                && java.util.Objects.equals(initialValues, other.initialValues)
                && collectiveTimeout.equals(other.collectiveTimeout) && cpuThreads == other.cpuThreads
                && debugStreams == other.debugStreams;
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(device, worldSize, strategy, shardGroupSize, precision, prefetch, microBatches,
                activationCheckpointing, offload, lr, beta1, beta2, eps, weightDecay, maxGradNorm, initialLossScale,
                lossScaleGrowthInterval, seed, initialValues, collectiveTimeout, cpuThreads, debugStreams);
    }

    @Override
    public String toString() {
        return "FsdpOptions[device=" + device + ", worldSize=" + worldSize + ", strategy=" + strategy.cliName()
                + (shardGroupSize > 0 ? ", shardGroupSize=" + shardGroupSize : "") + ", precision=(" + precision
                + "), prefetch=" + prefetch + ", microBatches=" + microBatches + ", activationCheckpointing="
                + activationCheckpointing + ", offload=" + offload + ", adamW=(" + lr + ", " + beta1 + ", " + beta2
                + ", " + eps + ", " + weightDecay + "), maxGradNorm=" + maxGradNorm + ", seed=" + seed
                + (initialValues != null ? ", initialValues=" + initialValues : "") + "]";
    }

    /** Collects the options; {@link #build()} makes the immutable {@link FsdpOptions}. */
    public static final class Builder {
        private String device = "cpu";
        private int worldSize = 1;
        private ShardingStrategy strategy = ShardingStrategy.FULL_SHARD;
        private int shardGroupSize;
        private MixedPrecisionPolicy precision = MixedPrecisionPolicy.FP32;
        private int prefetch = 1;
        private int microBatches = 1;
        private boolean activationCheckpointing;
        private boolean offload;
        private float lr = 1e-3f;
        private float beta1 = 0.9f;
        private float beta2 = 0.999f;
        private float eps = 1e-8f;
        private float weightDecay = 0.01f;
        private float maxGradNorm;
        private float initialLossScale = 65536f;
        private int lossScaleGrowthInterval = 1000;
        private long seed;
        private ParamSource initialValues;
        private Duration collectiveTimeout = Duration.ofMinutes(10);
        private int cpuThreads;
        private boolean debugStreams;

        private Builder() {
        }

        /**
         * Where the ranks run.
         *
         * @param device "cpu", "cuda" (one rank per GPU), "cuda:i" (every rank on GPU i) or "auto"
         *               (the GPU when there is one, else the CPU)
         * @return this
         */
        public Builder device(String device) {
            this.device = device;
            return this;
        }

        /**
         * The number of ranks N.
         *
         * @param n ranks, at least 1
         * @return this
         */
        public Builder worldSize(int n) {
            this.worldSize = n;
            return this;
        }

        /**
         * What is sharded; for HYBRID_SHARD use {@link #hybridShard(int)}.
         *
         * @param strategy the strategy
         * @return this
         */
        public Builder strategy(ShardingStrategy strategy) {
            this.strategy = strategy;
            this.shardGroupSize = 0;
            return this;
        }

        /**
         * HYBRID_SHARD: shard inside groups of S ranks, replicate across the N / S groups.
         *
         * @param shardGroupSize S, a divisor of the world size
         * @return this
         */
        public Builder hybridShard(int shardGroupSize) {
            this.strategy = ShardingStrategy.HYBRID_SHARD;
            this.shardGroupSize = shardGroupSize;
            return this;
        }

        /**
         * The shard group size S alone, keeping the strategy (the command line's --shard-group-size):
         * {@link #build()} refuses an S other than 0 unless the strategy is HYBRID_SHARD.
         *
         * @param shardGroupSize S, a divisor of the world size; 0 for the strategies other than HYBRID_SHARD
         * @return this
         */
        public Builder shardGroupSize(int shardGroupSize) {
            this.shardGroupSize = shardGroupSize;
            return this;
        }

        /**
         * The dtype parameters are all-gathered and computed in, keeping the reduce dtype.
         *
         * @param dtype fp32, bf16 or fp16
         * @return this
         */
        public Builder paramDtype(DType dtype) {
            this.precision = new MixedPrecisionPolicy(dtype, precision.reduceDtype());
            return this;
        }

        /**
         * The dtype gradients are reduce-scattered in, keeping the param dtype.
         *
         * @param dtype fp32, bf16 or fp16
         * @return this
         */
        public Builder reduceDtype(DType dtype) {
            this.precision = new MixedPrecisionPolicy(precision.paramDtype(), dtype);
            return this;
        }

        /**
         * The mixed-precision policy.
         *
         * @param precision parameter and reduce dtypes
         * @return this
         */
        public Builder precision(MixedPrecisionPolicy precision) {
            this.precision = precision;
            return this;
        }

        /**
         * How many units are all-gathered ahead of the one running.
         *
         * @param depth 0 (gather on demand) or more
         * @return this
         */
        public Builder prefetch(int depth) {
            this.prefetch = depth;
            return this;
        }

        /**
         * Gradient accumulation: forward/backward passes per step, each on an equal part of the
         * rank's samples; gradients are reduced once, after the last.
         *
         * @param m passes per step, at least 1
         * @return this
         */
        public Builder microBatches(int m) {
            this.microBatches = m;
            return this;
        }

        /**
         * Asks models to recompute their blocks' internals in backward instead of keeping them.
         *
         * @param on true to checkpoint
         * @return this
         */
        public Builder activationCheckpointing(boolean on) {
            this.activationCheckpointing = on;
            return this;
        }

        /**
         * Keeps the fp32 master shard, the gradient shard and the optimizer state in host
         * memory; the optimizer runs on the host.
         *
         * @param on true to offload
         * @return this
         */
        public Builder offload(boolean on) {
            this.offload = on;
            return this;
        }

        /**
         * The optimizer: AdamW with decoupled weight decay.
         *
         * @param lr          learning rate used when a step is not given one
         * @param beta1       β1
         * @param beta2       β2
         * @param eps         ε
         * @param weightDecay decoupled weight decay
         * @return this
         */
        public Builder adamW(float lr, float beta1, float beta2, float eps, float weightDecay) {
            this.lr = lr;
            this.beta1 = beta1;
            this.beta2 = beta2;
            this.eps = eps;
            this.weightDecay = weightDecay;
            return this;
        }

        /**
         * The learning rate used when a step is not given one.
         *
         * @param lr a positive number
         * @return this
         */
        public Builder lr(float lr) {
            this.lr = lr;
            return this;
        }

        /**
         * AdamW's decoupled weight decay alone, keeping the other AdamW values.
         *
         * @param weightDecay the decay factor, applied only to the parameters whose {@link ParamSpec#weightDecay()} asks for it
         * @return this
         */
        public Builder weightDecay(float weightDecay) {
            this.weightDecay = weightDecay;
            return this;
        }

        /**
         * The learning rate set so far, for a caller that checks it before {@link #build()}.
         *
         * @return the learning rate
         */
        public float lr() {
            return lr;
        }

        /**
         * The largest gradient norm set so far, for a caller that checks it before {@link #build()}.
         *
         * @return the norm; 0 when clipping is off
         */
        public float maxGradNorm() {
            return maxGradNorm;
        }

        /**
         * The host threads set so far, for a caller that checks them before {@link #build()}.
         *
         * @return the thread count; 0 for all cores
         */
        public int cpuThreads() {
            return cpuThreads;
        }

        /**
         * The collective timeout set so far, for a caller that checks it before {@link #build()}.
         *
         * @return the timeout, or null if none was given
         */
        public Duration collectiveTimeout() {
            return collectiveTimeout;
        }

        /**
         * Clips the global gradient norm (over all shards) to this before the update.
         *
         * @param norm the largest norm; 0 turns clipping off
         * @return this
         */
        public Builder maxGradNorm(float norm) {
            this.maxGradNorm = norm;
            return this;
        }

        /**
         * Dynamic loss scaling for fp16: the first scale, and the finite steps before it doubles
         * (it halves on an overflowing step, which is skipped).
         *
         * @param initialScale   the first scale, greater than 0
         * @param growthInterval finite steps before the scale doubles, at least 1
         * @return this
         */
        public Builder lossScaling(float initialScale, int growthInterval) {
            this.initialLossScale = initialScale;
            this.lossScaleGrowthInterval = growthInterval;
            return this;
        }

        /**
         * Seeds the parameters' initialisation (each parameter's values do not depend on the world size).
         *
         * @param seed any value
         * @return this
         */
        public Builder seed(long seed) {
            this.seed = seed;
            return this;
        }

        /**
         * Starts the parameters from these values instead of their seeded initialisers, e.g.
         * pretrained weights ({@link SafetensorsWeights}). Each rank reads only the elements its
         * shards hold, so the same source serves any world size; {@link Fsdp#shard} first checks
         * that it has every parameter of the model ({@link ParamSource#check}) and reads it
         * before it returns, so the source may be closed after that.
         *
         * @param values the source, or null for the seeded initialisers
         * @return this
         */
        public Builder initialValues(ParamSource values) {
            this.initialValues = values;
            return this;
        }

        /**
         * How long a rank waits for the others in one collective before the run fails naming the rank.
         *
         * @param timeout a positive duration
         * @return this
         */
        public Builder collectiveTimeout(Duration timeout) {
            this.collectiveTimeout = timeout;
            return this;
        }

        /**
         * Host threads the CPU backend may use, over all ranks of this process.
         *
         * @param threads 0 for all cores
         * @return this
         */
        public Builder cpuThreads(int threads) {
            this.cpuThreads = threads;
            return this;
        }

        /**
         * Runs every CPU stream on its own worker with random delays and poisons freed memory, so
         * that a missing stream ordering shows up as a wrong result (slow; for tests).
         *
         * @param on true to debug
         * @return this
         */
        public Builder debugStreams(boolean on) {
            this.debugStreams = on;
            return this;
        }

        /**
         * The options, each value checked.
         *
         * @return the immutable options
         * @throws IllegalArgumentException if a value is missing (null) or out of range, naming the option and
         *                                  what to change
         */
        public FsdpOptions build() {
            if (device == null || strategy == null || precision == null || collectiveTimeout == null) {
                throw new IllegalArgumentException("device, strategy, precision and collective timeout must be given");
            }
            if (worldSize < 1) {
                throw new IllegalArgumentException("world size must be >= 1, got " + worldSize);
            }
            if (strategy == ShardingStrategy.HYBRID_SHARD) {
                if (shardGroupSize == 0) {
                    throw new IllegalArgumentException("hybrid_shard needs --shard-group-size S, a divisor of the world size "
                            + worldSize);
                }
                ShardingStrategy.checkMesh(worldSize, shardGroupSize);
            } else if (shardGroupSize != 0) {
                throw new IllegalArgumentException("--shard-group-size applies to hybrid_shard only; " + strategy.cliName()
                        + " shards over " + (strategy == ShardingStrategy.NO_SHARD ? "no ranks" : "all " + worldSize + " ranks"));
            }
            if (prefetch < 0) {
                throw new IllegalArgumentException("prefetch depth must be >= 0 (0 = no prefetch), got " + prefetch);
            }
            if (microBatches < 1) {
                throw new IllegalArgumentException("micro-batches must be >= 1, got " + microBatches);
            }
            if (!(maxGradNorm >= 0) || !Float.isFinite(maxGradNorm)) {
                throw new IllegalArgumentException("max grad norm must be finite and >= 0 (0 = no clipping), got " + maxGradNorm);
            }
            if (!(initialLossScale > 0) || !Float.isFinite(initialLossScale) || lossScaleGrowthInterval < 1) {
                throw new IllegalArgumentException("loss scaling needs an initial scale > 0 and a growth interval >= 1, got "
                        + initialLossScale + " and " + lossScaleGrowthInterval);
            }
            if (collectiveTimeout.isZero() || collectiveTimeout.isNegative()) {
                throw new IllegalArgumentException("collective timeout must be > 0, got " + collectiveTimeout);
            }
            if (cpuThreads < 0) {
                throw new IllegalArgumentException("cpu threads must be >= 0 (0 = all cores), got " + cpuThreads);
            }
            if (!(lr > 0) || !Float.isFinite(lr)) {
                throw new IllegalArgumentException("the learning rate must be a positive number, got " + lr);
            }
            return new FsdpOptions(this);
        }
    }
}
