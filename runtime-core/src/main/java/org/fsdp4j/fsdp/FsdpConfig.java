// Everything the engine needs to know about how to shard and train, validated once, with an
// error per bad value that says what was asked, what is possible and what to change. The
// command line maps onto this record; tests build it with the withers.
package org.fsdp4j.fsdp;

import java.time.Duration;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.comm.DeviceMesh;

/**
 * @param worldSize               ranks N
 * @param strategy                what is sharded
 * @param shardGroupSize          S for HYBRID_SHARD (a divisor of N); 0 for every other strategy
 * @param precision               param and reduce dtypes (masters are fp32)
 * @param prefetchDepth           units all-gathered ahead of the one running (0 = gather on demand)
 * @param microBatches            forward/backward passes per step; gradients are reduced after the last
 * @param offload                 keep master shard, gradient shard and optimizer state on the host
 * @param maxGradNorm             clip the global gradient norm to this (0 = no clipping)
 * @param initialLossScale        first fp16 loss scale (used only when the policy has fp16)
 * @param lossScaleGrowthInterval good steps before the fp16 loss scale doubles
 * @param collectiveTimeout       how long a rank waits for the others in one collective
 */
public record FsdpConfig(int worldSize, ShardingStrategy strategy, int shardGroupSize, MixedPrecisionPolicy precision,
                         int prefetchDepth, int microBatches, boolean offload, float maxGradNorm,
                         float initialLossScale, int lossScaleGrowthInterval, Duration collectiveTimeout) {

    public FsdpConfig {
        if (worldSize < 1) {
            throw new IllegalArgumentException("world size must be >= 1, got " + worldSize);
        }
        if (strategy == null || precision == null || collectiveTimeout == null) {
            throw new IllegalArgumentException("strategy, precision and collective timeout are required");
        }
        if (strategy == ShardingStrategy.HYBRID_SHARD) {
            if (shardGroupSize == 0) {
                throw new IllegalArgumentException("hybrid_shard needs --shard-group-size S, a divisor of the world size "
                        + worldSize);
            }
            DeviceMesh.checkShape(worldSize, shardGroupSize);
        } else if (shardGroupSize != 0) {
            throw new IllegalArgumentException("--shard-group-size applies to hybrid_shard only; " + strategy.cliName()
                    + " shards over " + (strategy == ShardingStrategy.NO_SHARD ? "no ranks" : "all " + worldSize + " ranks"));
        }
        if (prefetchDepth < 0) {
            throw new IllegalArgumentException("prefetch depth must be >= 0 (0 = no prefetch), got " + prefetchDepth);
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
    }

    /** FULL_SHARD in fp32 over {@code worldSize} ranks, prefetch 1, one micro-batch, no clipping, 60 s timeout. */
    public static FsdpConfig fullShard(int worldSize) {
        return new FsdpConfig(worldSize, ShardingStrategy.FULL_SHARD, 0, MixedPrecisionPolicy.FP32, 1, 1, false, 0f,
                65536f, 1000, Duration.ofSeconds(60));
    }

    /** Ranks a unit's flat parameter is split over: N, S for HYBRID_SHARD, 1 for NO_SHARD. */
    public int shardSize() {
        switch (strategy) {
            case NO_SHARD: return 1;
            case HYBRID_SHARD: return shardGroupSize;
            default: return worldSize;
        }
    }

    /** Copies of each shard across the world: N / shardSize. */
    public int replicateSize() {
        return worldSize / shardSize();
    }

    /** Fails unless a global batch of {@code globalBatch} samples splits into N ranks × M equal micro-batches. */
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

    public FsdpConfig withStrategy(ShardingStrategy s, int shardGroup) {
        return new FsdpConfig(worldSize, s, shardGroup, precision, prefetchDepth, microBatches, offload, maxGradNorm,
                initialLossScale, lossScaleGrowthInterval, collectiveTimeout);
    }

    public FsdpConfig withPrecision(MixedPrecisionPolicy p) {
        return new FsdpConfig(worldSize, strategy, shardGroupSize, p, prefetchDepth, microBatches, offload, maxGradNorm,
                initialLossScale, lossScaleGrowthInterval, collectiveTimeout);
    }

    public FsdpConfig withPrefetchDepth(int depth) {
        return new FsdpConfig(worldSize, strategy, shardGroupSize, precision, depth, microBatches, offload, maxGradNorm,
                initialLossScale, lossScaleGrowthInterval, collectiveTimeout);
    }

    public FsdpConfig withMicroBatches(int m) {
        return new FsdpConfig(worldSize, strategy, shardGroupSize, precision, prefetchDepth, m, offload, maxGradNorm,
                initialLossScale, lossScaleGrowthInterval, collectiveTimeout);
    }

    public FsdpConfig withOffload(boolean o) {
        return new FsdpConfig(worldSize, strategy, shardGroupSize, precision, prefetchDepth, microBatches, o, maxGradNorm,
                initialLossScale, lossScaleGrowthInterval, collectiveTimeout);
    }

    public FsdpConfig withMaxGradNorm(float norm) {
        return new FsdpConfig(worldSize, strategy, shardGroupSize, precision, prefetchDepth, microBatches, offload, norm,
                initialLossScale, lossScaleGrowthInterval, collectiveTimeout);
    }

    public FsdpConfig withLossScaling(float initialScale, int growthInterval) {
        return new FsdpConfig(worldSize, strategy, shardGroupSize, precision, prefetchDepth, microBatches, offload,
                maxGradNorm, initialScale, growthInterval, collectiveTimeout);
    }

    public FsdpConfig withCollectiveTimeout(Duration timeout) {
        return new FsdpConfig(worldSize, strategy, shardGroupSize, precision, prefetchDepth, microBatches, offload,
                maxGradNorm, initialLossScale, lossScaleGrowthInterval, timeout);
    }
}
