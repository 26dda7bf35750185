// A piece of a unit with its own forward and backward, for models built with SequentialModel:
// the library's layers (Layers) and a user's own. A layer declares its parameters; the model lays
// them out in its unit and binds them, so param(i) and grad(i) are the unit's bound tensors at
// the time of the call (the engine re-gathers them between forward and backward).
package org.fsdp4j.api;

import java.util.List;

/**
 * One step of a {@link SequentialModel} unit: a forward that maps the activations to new ones and
 * keeps what its backward needs, and a backward that accumulates its parameters' gradients and
 * returns the input's. Make the library's with {@link Layers}, or extend this class.
 *
 * <p>A layer instance belongs to one place in one model (it keeps the activations of the last
 * forward), so build a new one for every block.
 */
public abstract class Layer {

    private Unit unit;
    private int first;

    /** For subclasses. */
    protected Layer() {
    }

    /**
     * The parameters this layer declares, named under {@code prefix}; none by default.
     *
     * @param prefix the unit's and the layer's position, e.g. "block3.1"
     * @return the specs, in the order {@link #param(int)} indexes them
     */
    protected List<ParamSpec> params(String prefix) {
        return List.of();
    }

    /**
     * Computes the output from {@code x} and keeps what the backward needs.
     *
     * @param s where to allocate (activations are freed by the model after the unit's backward)
     * @param x the input, owned by the model
     * @return the output, allocated with {@link Scope#activation}
     */
    protected abstract Tensor forward(Scope s, Tensor x);

    /**
     * Accumulates this layer's parameter gradients and returns the input's gradient.
     *
     * @param s         where to allocate
     * @param dy        the output's gradient (the layer may overwrite it)
     * @param inputGrad false when nothing needs the input's gradient (the model's first layer)
     * @return dx, or null when {@code inputGrad} is false
     */
    protected abstract Tensor backward(Scope s, Tensor dy, boolean inputGrad);

    /**
     * This layer's parameter {@code i}, as bound now.
     *
     * @param i the index in {@link #params(String)}'s list
     * @return the bound tensor
     */
    protected final Tensor param(int i) {
        return unit.param(first + i);
    }

    /**
     * The gradient of this layer's parameter {@code i}, as bound now (accumulate into it).
     *
     * @param i the index in {@link #params(String)}'s list
     * @return the bound gradient
     */
    protected final Tensor grad(int i) {
        return unit.grad(first + i);
    }

    /** The layers inside this one (a residual's), which declare their own parameters; none by default. */
    List<Layer> children() {
        return List.of();
    }

    /** Called by SequentialModel when it lays the unit out: this layer's parameters start at {@code first}. */
    final List<ParamSpec> place(int first, String prefix) {
        this.first = first;
        return params(prefix);
    }

    /** Called by SequentialModel once the unit exists. */
    final void bind(Unit unit) {
        this.unit = unit;
    }

    /**
     * Where a layer allocates: the rank's operations, the compute dtype, and activations that the
     * model frees for it.
     */
    public interface Scope {

        /**
         * The operations to compute with.
         *
         * @return the rank's ops
         */
        Ops ops();

        /**
         * The dtype activations take (the parameters' compute dtype).
         *
         * @return the dtype
         */
        DType dtype();

        /**
         * A zeroed activation in the compute dtype, freed by the model after the unit's backward.
         *
         * @param shape the shape
         * @return the tensor
         */
        Tensor activation(long... shape);

        /**
         * A zeroed activation of {@code dtype} (statistics are F32), freed as {@link #activation} is.
         *
         * @param dtype the dtype
         * @param shape the shape
         * @return the tensor
         */
        Tensor activation(DType dtype, long... shape);
    }
}
