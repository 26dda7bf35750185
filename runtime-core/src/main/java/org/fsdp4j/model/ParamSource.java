// Where a parameter's starting values come from, element range by element range: whoever owns the
// storage asks for exactly the elements it holds — the single-rank ParameterStore for whole
// parameters, each FSDP rank for the slices of its shards (ShardedUnit) — so a source must give any
// range of any parameter without the rest. Two kinds exist: ParamInit's seeded random
// initialisation (initialized), and pretrained weights read from a checkpoint
// (org.fsdp4j.weights.PretrainedWeights), which reshards them on load at any world size.
package org.fsdp4j.model;

@FunctionalInterface
public interface ParamSource {

    /**
     * Elements [firstElement, firstElement + count) of the parameter {@code spec} declares
     * (row-major, as the spec's shape) into out[outOffset .. outOffset + count). May be called from
     * several threads at once (one per in-process rank).
     */
    void fill(ParamSpec spec, long firstElement, float[] out, int outOffset, int count);

    /** ParamInit's values for {@code seed}: what a run starts from unless it loads weights. */
    static ParamSource initialized(long seed) {
        return (spec, firstElement, out, outOffset, count) -> ParamInit.fill(spec, seed, firstElement, out, outOffset,
                count);
    }
}
