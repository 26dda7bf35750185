// What is sharded across the ranks (docs/ARCHITECTURE.md, "Strategies"). Every strategy is run by the same
// engine: they differ only in the size of the group a unit's flat parameter is split over,
// whether parameters are freed after forward, and how gradients are reduced.
package org.fsdp4j.api;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * What is sharded across the N ranks (docs/ARCHITECTURE.md, "Strategies"), with PyTorch FSDP's
 * names. One engine runs them all: they differ only in the size of the group a unit's flat
 * parameter is split over, whether parameters are freed after forward, and how gradients are
 * reduced. The default of {@link FsdpOptions} is {@link #FULL_SHARD}; {@link #HYBRID_SHARD} is
 * chosen with {@link FsdpOptions.Builder#hybridShard(int)}.
 */
public enum ShardingStrategy {
    /** ZeRO-3: params, grads and optimizer state sharded over all N; params re-gathered in backward. */
    FULL_SHARD,
    /** ZeRO-2: as FULL_SHARD, but params gathered in forward stay gathered until their backward. */
    SHARD_GRAD_OP,
    /** ZeRO-1: params and grads replicated (grads all-reduced), optimizer state and master sharded; updated params all-gathered. */
    OPTIMIZER_ONLY,
    /** DDP: everything replicated, grads all-reduced. */
    NO_SHARD,
    /** FULL_SHARD inside shard groups of S ranks, replicated (grads all-reduced) across the N/S groups. */
    HYBRID_SHARD;

    /**
     * The name used on the command line and in summaries.
     *
     * @return the constant's name in lower case: "full_shard", "shard_grad_op", ...
     */
    public String cliName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * Parses a strategy's name, ignoring case and surrounding blanks; '-' may stand for '_'.
     *
     * @param name e.g. "full_shard", "FULL-SHARD", "no_shard"
     * @return the strategy
     * @throws IllegalArgumentException if no strategy has that name; the message lists the accepted ones
     */
    public static ShardingStrategy parse(String name) {
        String n = name.trim().toUpperCase(Locale.ROOT).replace('-', '_');
        for (ShardingStrategy s : values()) {
            if (s.name().equals(n)) {
                return s;
            }
        }
        throw new IllegalArgumentException("unknown strategy '" + name + "': use one of "
                + Arrays.stream(values()).map(ShardingStrategy::cliName).collect(Collectors.joining(", ")));
    }

    /**
     * Whether every rank holds the whole parameters (in the compute dtype) for the whole run, so
     * nothing is gathered before a unit runs.
     *
     * @return true for {@link #OPTIMIZER_ONLY} and {@link #NO_SHARD}
     */
    public boolean replicatesParams() {
        return this == OPTIMIZER_ONLY || this == NO_SHARD;
    }

    /**
     * Whether a unit's gathered parameters are freed after its forward and gathered again for its
     * backward (less memory, one more all-gather per unit).
     *
     * @return true for {@link #FULL_SHARD} and {@link #HYBRID_SHARD}
     */
    public boolean reshardsAfterForward() {
        return this == FULL_SHARD || this == HYBRID_SHARD;
    }

    /**
     * Fails unless {@code shardGroupSize} ranks per shard group tile a world of {@code worldSize}
     * ranks (HYBRID_SHARD's mesh: N = replicate × S), with the message a user needs.
     *
     * @param worldSize      N, the ranks of the run
     * @param shardGroupSize S, the ranks of one shard group
     * @throws IllegalArgumentException if N is below 1 or S does not divide N; the message lists N's divisors
     */
    public static void checkMesh(int worldSize, int shardGroupSize) {
        if (worldSize < 1) {
            throw new IllegalArgumentException("world size must be >= 1, got " + worldSize);
        }
        if (shardGroupSize < 1 || worldSize % shardGroupSize != 0) {
            StringBuilder divisors = new StringBuilder();
            for (int d = 1; d <= worldSize; d++) {
                if (worldSize % d == 0) {
                    divisors.append(divisors.length() == 0 ? "" : ", ").append(d);
                }
            }
            throw new IllegalArgumentException("shard group size " + shardGroupSize + " does not divide world size "
                    + worldSize + ": use one of " + divisors);
        }
    }
}
