// Where a parameter's starting values come from, element range by element range: whoever owns the
// storage asks for exactly the elements it holds (each FSDP rank the slices of its shards, at any
// world size; the tests' unsharded ParameterStore whole parameters), so a source must give any
// range of any parameter without the rest. Two kinds exist: ParamInit's seeded random initialisation (seeded), and
// pretrained weights read from safetensors files (SafetensorsWeights, org.fsdp4j.weights), which
// are resharded on load at any world size. FsdpOptions carries one; the engine knows nothing else
// about it.
package org.fsdp4j.api;

import java.util.List;

/**
 * The values a sharded model starts from, by parameter and element range. {@link Fsdp#shard}
 * asks it, on every rank, for exactly the elements that rank's shards hold, so no rank reads
 * more than its share and the same source serves any world size. By default a model starts from
 * {@link #seeded(long)} with {@link FsdpOptions#seed()}; pretrained weights
 * ({@link SafetensorsWeights}) are given with {@link FsdpOptions.Builder#initialValues}.
 */
@FunctionalInterface
public interface ParamSource {

    /**
     * Copies elements {@code [firstElement, firstElement + count)} of the parameter {@code spec}
     * declares (row-major, as the spec's shape) into {@code out[outOffset .. outOffset + count)},
     * as fp32. May be called from several threads at once (one per rank of this process).
     *
     * @param spec         the parameter, as its unit declares it (name, shape)
     * @param firstElement the first element wanted, {@code 0 <= firstElement < spec.numel()}
     * @param out          where the values go
     * @param outOffset    the first index of {@code out} written
     * @param count        elements wanted, with {@code firstElement + count <= spec.numel()}
     * @throws IllegalArgumentException naming the parameter if the source has no values for it
     */
    void fill(ParamSpec spec, long firstElement, float[] out, int outOffset, int count);

    /**
     * Checks, before any {@link #fill}, that this source can give every parameter of the model:
     * {@link Fsdp#shard} calls it once with all the model's parameters, so a source that cannot
     * (a missing tensor, another shape) fails the call before the first step. The default
     * accepts any model.
     *
     * @param params every parameter of the model, unit by unit in order
     * @throws IllegalArgumentException naming the first parameter (or tensor) that does not fit
     */
    default void check(List<ParamSpec> params) {
    }

    /**
     * The parameters' own initialisers ({@link ParamSpec#init()}) seeded with {@code seed}: what
     * a model starts from unless it is given weights. Each element's value depends only on the
     * seed, the parameter and the element's index, so it is the same at every world size.
     *
     * @param seed any value
     * @return the seeded initial values
     */
    static ParamSource seeded(long seed) {
        return (spec, firstElement, out, outOffset, count) -> ParamInit.fill(spec, seed, firstElement, out, outOffset,
                count);
    }
}
