// What is sharded across the ranks (docs/ARCHITECTURE.md, "Strategies"). Every strategy is run by the same
// engine: they differ only in the size of the group a unit's flat parameter is split over,
// whether parameters are freed after forward, and how gradients are reduced.
package org.fsdp4j.api;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

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

    /** The name used on the command line and in summaries: full_shard, shard_grad_op, ... */
    public String cliName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** Parses a command-line name; the error lists the accepted ones. */
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

    /** Parameters stay unsharded (gathered) for the whole run on every rank. */
    public boolean replicatesParams() {
        return this == OPTIMIZER_ONLY || this == NO_SHARD;
    }

    /** A unit's gathered parameters are freed after its forward (and gathered again for backward). */
    public boolean reshardsAfterForward() {
        return this == FULL_SHARD || this == HYBRID_SHARD;
    }
}
