// What a model declares about one parameter: its name, shape, how it is initialised and
// whether weight decay applies. Whoever owns the storage (the FSDP engine; in tests, an
// unsharded store) lays parameters out from these specs; the model never allocates its own parameters.
package org.fsdp4j.api;

import java.util.Arrays;

/**
 * What a model declares about one parameter; a {@link Unit} holds a list of them. The model never
 * allocates its parameters: the runtime lays each unit's parameters out in one flat fp32 buffer
 * (sharded over the ranks), initialises them from these specs, and binds views of the gathered
 * parameters (in the compute dtype) to the unit before it runs.
 *
 * <p>Initial values are deterministic: element i of a parameter is a function of the options'
 * seed, the parameter's name and i only, so a model starts from the same values at every world
 * size and strategy. Immutable (the shape is copied in and out).
 *
 * <pre>{@code
 * ParamSpec.normal("block0.fc.weight", 0.02, true, 256, 64)   // (out, in), decayed
 * ParamSpec.zeros("block0.fc.bias", 256)                      // not decayed
 * }</pre>
 *
 * @param name        the parameter's name, unique in the model; state dicts are keyed by it
 *                    (e.g. "block3.attn.qkv.weight")
 * @param shape       the parameter's shape, row-major; every dimension at least 1
 * @param init        how the initial values are drawn
 * @param initStd     the standard deviation of {@link Init#NORMAL} (mean 0); ignored otherwise
 * @param weightDecay whether AdamW's decoupled weight decay ({@link FsdpOptions#weightDecay()})
 *                    applies to it; usually true for matrices, false for biases and norm weights
 */
public record ParamSpec(String name, long[] shape, Init init, double initStd, boolean weightDecay) {

    /** How the initial values are drawn. */
    public enum Init {
        /** Normal with mean 0 and standard deviation {@code initStd}, rounded once to fp32. */
        NORMAL,
        /** Every element 0. */
        ZEROS,
        /** Every element 1 (norm weights). */
        ONES
    }

    /**
     * Checks the values and copies the shape.
     *
     * @param name        the parameter's name, unique in the model; state dicts are keyed by it
     *                    (e.g. "block3.attn.qkv.weight")
     * @param shape       the parameter's shape, row-major; every dimension at least 1
     * @param init        how the initial values are drawn
     * @param initStd     the standard deviation of {@link Init#NORMAL} (mean 0); ignored otherwise
     * @param weightDecay whether AdamW's decoupled weight decay
     *                    ({@link FsdpOptions#weightDecay()}) applies to it; usually true for
     *                    matrices, false for biases and norm weights
     * @throws IllegalArgumentException if the shape holds no element, or NORMAL is given a
     *                                  standard deviation that is not positive
     * @throws NullPointerException     if {@code shape} is null
     */
    public ParamSpec {
        shape = shape.clone();
        if (Tensor.numelOf(shape) <= 0) {
            throw new IllegalArgumentException("parameter " + name + " has no elements: " + Arrays.toString(shape));
        }
        if (init == Init.NORMAL && !(initStd > 0)) {
            throw new IllegalArgumentException("parameter " + name + ": NORMAL init needs std > 0");
        }
    }

    /**
     * A parameter drawn from N(0, std²).
     *
     * @param name        the parameter's name, unique in the model
     * @param std         the standard deviation, greater than 0 (GPT-2 uses 0.02)
     * @param weightDecay whether weight decay applies to it
     * @param shape       its shape
     * @return the spec
     * @throws IllegalArgumentException if {@code std} is not positive or the shape holds no element
     */
    public static ParamSpec normal(String name, double std, boolean weightDecay, long... shape) {
        return new ParamSpec(name, shape, Init.NORMAL, std, weightDecay);
    }

    /**
     * A parameter starting at 0, without weight decay (a bias).
     *
     * @param name  the parameter's name, unique in the model
     * @param shape its shape
     * @return the spec
     * @throws IllegalArgumentException if the shape holds no element
     */
    public static ParamSpec zeros(String name, long... shape) {
        return new ParamSpec(name, shape, Init.ZEROS, 0, false);
    }

    /**
     * A parameter starting at 1, without weight decay (a norm's weight).
     *
     * @param name  the parameter's name, unique in the model
     * @param shape its shape
     * @return the spec
     * @throws IllegalArgumentException if the shape holds no element
     */
    public static ParamSpec ones(String name, long... shape) {
        return new ParamSpec(name, shape, Init.ONES, 0, false);
    }

    /**
     * Elements of the parameter.
     *
     * @return the product of the shape's dimensions
     */
    public long numel() {
        return Tensor.numelOf(shape);
    }

    /**
     * The parameter's shape.
     *
     * @return a copy of the shape
     */
    @Override
    public long[] shape() {
        return shape.clone();
    }

    /**
     * Equal when every component is, the shapes compared element by element.
     *
     * @param o any object
     * @return whether {@code o} is a spec with the same name, shape, init, std and weight decay
     */
    @Override
    public boolean equals(Object o) {
        return o instanceof ParamSpec p && p.name.equals(name) && Arrays.equals(p.shape, shape)
                && p.init == init && p.initStd == initStd && p.weightDecay == weightDecay;
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Arrays.hashCode(shape);
    }

    @Override
    public String toString() {
        return name + Arrays.toString(shape);
    }
}
