// Where loadShardedStateDict reads saved values from: any element range of any parameter's
// buffer by name. A ShardedStateDict answers from its shards, a checkpoint from its files, so a
// state saved at one world size or strategy loads at another.
package org.fsdp4j.api;

/**
 * Saved values by parameter name and element range, as
 * {@link ShardedModel#loadShardedStateDict(StateSource, ShardedStateDict.Progress)} reads them.
 * Buffers are named as in {@link ShardedStateDict#bufferNames()}.
 */
@FunctionalInterface
public interface StateSource {

    /**
     * Copies elements {@code [start, start + count)} (row-major) of parameter {@code param}'s
     * buffer {@code buffer} into {@code out[offset ..]}.
     *
     * @param param  the parameter's name, as its {@link ParamSpec} gives it
     * @param buffer {@link ShardedStateDict#PARAM}, {@link ShardedStateDict#EXP_AVG} or {@link ShardedStateDict#EXP_AVG_SQ}
     * @param start  the first element
     * @param out    where to copy to
     * @param offset the first index of {@code out} written
     * @param count  elements to copy
     * @throws IllegalArgumentException naming the parameter and buffer if the source does not hold them
     */
    void read(String param, String buffer, long start, float[] out, int offset, int count);
}
