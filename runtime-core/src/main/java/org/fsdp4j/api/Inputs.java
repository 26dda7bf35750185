// What a model's forward reads: one micro-batch of named input tensors on the model's device,
// in the order the batch declared them (a GPT's "tokens" and "targets"; an image model's
// "images" and "labels"). The runtime uploads them from a Batch; the model never sees host data.
package org.fsdp4j.api;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One micro-batch of named input tensors on the model's device, as {@link TrainableModel#forward}
 * receives them. Dimension 0 of every tensor is the sample; the names and the other dimensions
 * are the ones the {@link Batch} declared. The runtime owns the tensors: a model reads them
 * during forward and must not close them.
 */
public final class Inputs {

    private final Map<String, Tensor> byName;

    private Inputs(Map<String, Tensor> byName) {
        this.byName = byName;
    }

    /**
     * Inputs with these names and tensors, in this order.
     *
     * @param tensors name to tensor, iterated in the order the model should see them
     * @return the inputs
     * @throws IllegalArgumentException if there are none, or the tensors disagree on the sample count
     */
    public static Inputs of(Map<String, Tensor> tensors) {
        if (tensors.isEmpty()) {
            throw new IllegalArgumentException("a model needs at least one input tensor");
        }
        Map<String, Tensor> copy = new LinkedHashMap<>(tensors);
        long samples = -1;
        for (Map.Entry<String, Tensor> e : copy.entrySet()) {
            Tensor t = e.getValue();
            if (t.rank() == 0) {
                throw new IllegalArgumentException("input '" + e.getKey() + "' is a scalar; dimension 0 must be the sample");
            }
            if (samples >= 0 && t.dim(0) != samples) {
                throw new IllegalArgumentException("input '" + e.getKey() + "' has " + t.dim(0)
                        + " samples, the inputs before it " + samples);
            }
            samples = t.dim(0);
        }
        return new Inputs(Collections.unmodifiableMap(copy));
    }

    /**
     * The input named {@code name}.
     *
     * @param name the name the batch gave it
     * @return its tensor on the model's device
     * @throws IllegalArgumentException naming the inputs there are, if none has that name
     */
    public Tensor get(String name) {
        Tensor t = byName.get(name);
        if (t == null) {
            throw new IllegalArgumentException("the model reads an input named '" + name + "', but the batch has "
                    + names() + ": give the batch a field named '" + name + "'");
        }
        return t;
    }

    /**
     * The names, in order.
     *
     * @return an unmodifiable list of the input names
     */
    public List<String> names() {
        return List.copyOf(new ArrayList<>(byName.keySet()));
    }

    /**
     * Samples in this micro-batch: dimension 0 of every input.
     *
     * @return the sample count
     */
    public int samples() {
        return Math.toIntExact(byName.values().iterator().next().dim(0));
    }

    @Override
    public String toString() {
        return "Inputs" + byName;
    }
}
