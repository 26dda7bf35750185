// One rank's training state as a checkpoint sees it, copied to the host: for every unit its flat
// layout and this rank's shard of each buffer (the fp32 master, then the optimizer's state), plus
// the optimizer's step count and the loss scaler. Element ranges are read from the layout's
// ShardSlices (parameter name, element range), never from flat offsets, which depend on the
// padding and the shard count; a Source answers the same questions when the state is loaded at
// another world size or strategy.
package org.fsdp4j.fsdp;

import java.util.List;

/**
 * @param worldRank          the rank's place in the world
 * @param shardIndex         which shard of every unit it holds (its place in its shard group)
 * @param replicaIndex       which copy of the shards it belongs to (0 unless HYBRID_SHARD or NO_SHARD replicate)
 * @param optimizerSteps     optimizer updates applied so far (AdamW's bias correction counts them)
 * @param lossScale          the loss scaler's scale (1 without fp16)
 * @param lossScaleGoodSteps finite steps since the scale last changed
 * @param bufferNames        "param" (the fp32 master), then the optimizer's state names ("exp_avg", "exp_avg_sq")
 * @param units              root first, then the blocks
 */
public record RankState(int worldRank, int shardIndex, int replicaIndex, int optimizerSteps, float lossScale,
                        int lossScaleGoodSteps, List<String> bufferNames, List<UnitState> units) {

    /** The master buffer's name in bufferNames. */
    public static final String MASTER = "param";

    /**
     * @param layout  the unit's flat layout (its slices say which parameter elements the shard holds)
     * @param buffers one (shardNumel) array per buffer name, padding included (zero)
     */
    public record UnitState(FlatParamLayout layout, List<float[]> buffers) {
    }

    /** Where a load reads the saved values from. */
    @FunctionalInterface
    public interface Source {
        /** Elements [start, start + count) of parameter {@code param}'s buffer {@code buffer} (row-major) into out[offset ..]. */
        void read(String param, String buffer, long start, float[] out, int offset, int count);
    }
}
