// A unit is what FSDP wraps: one transformer block, or the root (embeddings, final norm, head).
// The model declares each unit's parameters; the storage owner binds tensors (views into a
// flat buffer) before the unit runs and unbinds them after, so a unit used while its
// parameters are not gathered fails loudly instead of reading freed memory.
package org.fsdp4j.api;

import java.util.List;

public final class Unit {

    private final String name;
    private final int index;
    private final List<ParamSpec> params;
    private Tensor[] paramViews;   // bound parameters, one per spec, or null
    private Tensor[] gradViews;    // bound gradients, one per spec, or null

    public Unit(String name, int index, List<ParamSpec> params) {
        this.name = name;
        this.index = index;
        this.params = List.copyOf(params);
    }

    public String name() {
        return name;
    }

    /** Position in the model's unit list (root first, then blocks in forward order). */
    public int index() {
        return index;
    }

    public List<ParamSpec> params() {
        return params;
    }

    public long numel() {
        long n = 0;
        for (ParamSpec p : params) {
            n += p.numel();
        }
        return n;
    }

    public synchronized void bindParams(List<Tensor> tensors) {
        paramViews = checked(tensors, "parameter");
    }

    public synchronized void bindGrads(List<Tensor> tensors) {
        gradViews = checked(tensors, "gradient");
    }

    public synchronized void unbindParams() {
        paramViews = null;
    }

    public synchronized void unbindGrads() {
        gradViews = null;
    }

    public synchronized boolean paramsBound() {
        return paramViews != null;
    }

    public synchronized boolean gradsBound() {
        return gradViews != null;
    }

    /** Parameter i of this unit; throws if the unit's parameters are not bound (not gathered). */
    public synchronized Tensor param(int i) {
        if (paramViews == null) {
            throw new IllegalStateException("unit " + name + " used while its parameters are not bound (not gathered)");
        }
        return paramViews[i];
    }

    /** Gradient of parameter i; throws if no gradient buffer is bound. */
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
