// A unit is what FSDP wraps: one transformer block, or the root (embeddings, final norm, head).
// The model declares each unit's parameters; the storage owner binds tensors (views into a
// flat buffer) before the unit runs and unbinds them after, so a unit used while its
// parameters are not gathered fails loudly instead of reading freed memory.
package org.fsdp4j.api;

import java.util.List;

/**
 * What FSDP wraps and gathers as one: one transformer block, or the root (embeddings, final norm,
 * head). A model creates its units with their {@link ParamSpec}s and returns them from
 * {@link TrainableModel#units()}; the runtime owns the storage and binds the unit's parameter and
 * gradient tensors (views into its flat buffers, shapes as the specs say) around the unit's
 * forward and backward, in the {@link UnitHooks} the model calls. Between those calls the tensors
 * are unbound, so a unit used while its parameters are not gathered fails loudly instead of
 * reading freed memory.
 *
 * <p>Bound parameters have the compute dtype ({@link ModelContext#computeDtype()}); the model
 * reads them and never writes or closes them. Bound gradients have the compute dtype too, and the
 * model's backward accumulates ({@code +=}) into them. The binding methods are for the runtime
 * (and tests that bind a whole model once); all methods are synchronized.
 */
public final class Unit {

    private final String name;
    private final int index;
    private final List<ParamSpec> params;
    private Tensor[] paramViews;   // bound parameters, one per spec, or null
    private Tensor[] gradViews;    // bound gradients, one per spec, or null

    /**
     * A unit with nothing bound.
     *
     * @param name   the unit's name, unique in the model ("root", "block3"); reports and
     *               errors name it
     * @param index  its position in {@link TrainableModel#units()}
     * @param params its parameters, in the order {@link #param(int)} and {@link #grad(int)} index
     *               them (copied)
     */
    public Unit(String name, int index, List<ParamSpec> params) {
        this.name = name;
        this.index = index;
        this.params = List.copyOf(params);
    }

    /**
     * The unit's name.
     *
     * @return the name given at construction
     */
    public String name() {
        return name;
    }

    /**
     * The unit's position in the model's unit list (for a GPT: the root first, then the blocks in
     * forward order).
     *
     * @return the index given at construction
     */
    public int index() {
        return index;
    }

    /**
     * The unit's parameters.
     *
     * @return an unmodifiable list, in index order
     */
    public List<ParamSpec> params() {
        return params;
    }

    /**
     * Elements of all the unit's parameters, unpadded.
     *
     * @return the sum of the specs' element counts
     */
    public long numel() {
        long n = 0;
        for (ParamSpec p : params) {
            n += p.numel();
        }
        return n;
    }

    /**
     * Binds the parameter tensors (runtime use): the unit's gathered parameters, one per spec.
     * The caller keeps owning them.
     *
     * @param tensors one tensor per spec, in order, each of its spec's shape
     * @throws IllegalArgumentException if the count or a shape does not match the specs
     */
    public synchronized void bindParams(List<Tensor> tensors) {
        paramViews = checked(tensors, "parameter");
    }

    /**
     * Binds the gradient tensors (runtime use), one per spec, that backward accumulates into.
     * The caller keeps owning them.
     *
     * @param tensors one tensor per spec, in order, each of its spec's shape
     * @throws IllegalArgumentException if the count or a shape does not match the specs
     */
    public synchronized void bindGrads(List<Tensor> tensors) {
        gradViews = checked(tensors, "gradient");
    }

    /** Unbinds the parameters (runtime use); {@link #param(int)} throws until they are bound again. */
    public synchronized void unbindParams() {
        paramViews = null;
    }

    /** Unbinds the gradients (runtime use); {@link #grad(int)} throws until they are bound again. */
    public synchronized void unbindGrads() {
        gradViews = null;
    }

    /**
     * Whether parameter tensors are bound now.
     *
     * @return true between {@link #bindParams} and {@link #unbindParams}
     */
    public synchronized boolean paramsBound() {
        return paramViews != null;
    }

    /**
     * Whether gradient tensors are bound now.
     *
     * @return true between {@link #bindGrads} and {@link #unbindGrads}
     */
    public synchronized boolean gradsBound() {
        return gradViews != null;
    }

    /**
     * Parameter {@code i} as bound now: between {@code hooks.preForward(unit)} and
     * {@code hooks.postForward(unit)}, and in a backward segment that reads the parameters.
     * Read it only; the runtime owns it. Do not keep it past the hook that ends the segment.
     *
     * @param i the index in {@link #params()}
     * @return the bound parameter, of the spec's shape, in the compute dtype
     * @throws IllegalStateException if the unit's parameters are not bound (not gathered)
     * @throws ArrayIndexOutOfBoundsException if {@code i} is not an index of {@link #params()}
     */
    public synchronized Tensor param(int i) {
        if (paramViews == null) {
            throw new IllegalStateException("unit " + name + " used while its parameters are not bound (not gathered)");
        }
        return paramViews[i];
    }

    /**
     * The gradient of parameter {@code i} as bound now: between {@code hooks.preBackward(unit)}
     * and {@code hooks.postBackward(unit)}. Accumulate into it ({@code +=}); the runtime owns it
     * and reduces it over the ranks once the step's last micro-batch has finished the unit.
     *
     * @param i the index in {@link #params()}
     * @return the bound gradient, of the spec's shape
     * @throws IllegalStateException if no gradient buffer is bound
     * @throws ArrayIndexOutOfBoundsException if {@code i} is not an index of {@link #params()}
     */
    public synchronized Tensor grad(int i) {
        if (gradViews == null) {
            throw new IllegalStateException("unit " + name + " ran backward with no gradient buffer bound");
        }
        return gradViews[i];
    }

    private Tensor[] checked(List<Tensor> tensors, String what) {
        if (tensors.size() != params.size()) {
            throw new IllegalArgumentException("unit " + name + " has " + params.size() + " parameters, got "
                    + tensors.size() + " " + what + " tensors");
        }
        Tensor[] out = new Tensor[tensors.size()];
        for (int i = 0; i < out.length; i++) {
            Tensor t = tensors.get(i);
            ParamSpec s = params.get(i);
            if (!java.util.Arrays.equals(t.shape(), s.shape())) {
                throw new IllegalArgumentException("unit " + name + ": " + what + " for " + s + " has shape "
                        + java.util.Arrays.toString(t.shape()));
            }
            out[i] = t;
        }
        return out;
    }

    @Override
    public String toString() {
        return "Unit(" + name + ", " + params.size() + " params, " + numel() + " elements)";
    }
}
