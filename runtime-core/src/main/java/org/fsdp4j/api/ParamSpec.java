// What a model declares about one parameter: its name, shape, how it is initialised and
// whether weight decay applies. Whoever owns the storage (single-rank store, FSDP engine)
// lays parameters out from these specs; the model never allocates its own parameters.
package org.fsdp4j.api;

import java.util.Arrays;

public record ParamSpec(String name, long[] shape, Init init, double initStd, boolean weightDecay) {

    /** How the initial values are drawn. */
    public enum Init { NORMAL, ZEROS, ONES }

    public ParamSpec {
        shape = shape.clone();
        if (Tensor.numelOf(shape) <= 0) {
            throw new IllegalArgumentException("parameter " + name + " has no elements: " + Arrays.toString(shape));
        }
        if (init == Init.NORMAL && !(initStd > 0)) {
            throw new IllegalArgumentException("parameter " + name + ": NORMAL init needs std > 0");
        }
    }

    public static ParamSpec normal(String name, double std, boolean weightDecay, long... shape) {
        return new ParamSpec(name, shape, Init.NORMAL, std, weightDecay);
    }

    public static ParamSpec zeros(String name, long... shape) {
        return new ParamSpec(name, shape, Init.ZEROS, 0, false);
    }

    public static ParamSpec ones(String name, long... shape) {
        return new ParamSpec(name, shape, Init.ONES, 0, false);
    }

    public long numel() {
        return Tensor.numelOf(shape);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

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
