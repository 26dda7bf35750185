// A TrainableModel made of units of Layers, for users who would rather not write a backward:
// the input runs through every unit's layers in order and a softmax cross-entropy against the
// labels ends it; the backward runs them in reverse, calling the unit hooks around each unit, so
// the engine shards it like any model. Activations are freed unit by unit in the backward.
package org.fsdp4j.api;

import java.util.ArrayList;
import java.util.List;

/**
 * A model made of units of {@link Layer}s ending in a softmax cross-entropy, whose backward
 * fsdp4j runs for you:
 *
 * <pre>{@code
 * ModelFactory mlp = ctx -> SequentialModel.builder(ctx, "features", "labels")
 *         .unit("in", Layers.linear(32, 64))
 *         .unit("block0", Layers.residual(Layers.layerNorm(64), Layers.linear(64, 256), Layers.gelu(),
 *                 Layers.linear(256, 64)))
 *         .unit("out", Layers.linear(64, 10))
 *         .build();
 * }</pre>
 *
 * <p>The last unit's output holds the logits, (B, K) or (B, T, K), and the labels field the
 * class indices, (B) or (B, T). Parameters are named {@code unit.layer[.inner].weight}. It keeps
 * every unit's activations until that unit's backward (no activation checkpointing).
 */
public final class SequentialModel implements TrainableModel {

    /** Collects the units; {@link #build()} makes the model. */
    public static final class Builder {
        private final ModelContext ctx;
        private final String input;
        private final String labels;
        private final List<String> names = new ArrayList<>();
        private final List<List<Layer>> layers = new ArrayList<>();

        private Builder(ModelContext ctx, String input, String labels) {
            this.ctx = ctx;
            this.input = input;
            this.labels = labels;
        }

        /**
         * Adds a unit: what the engine gathers, frees and reduces as one.
         *
         * @param name   the unit's name (prefixes its parameters' names)
         * @param layers its layers, in forward order (new instances: a layer belongs to one place)
         * @return this
         */
        public Builder unit(String name, Layer... layers) {
            if (layers.length == 0) {
                throw new IllegalArgumentException("unit " + name + " has no layers");
            }
            names.add(name);
            this.layers.add(List.of(layers));
            return this;
        }

        /**
         * The model.
         *
         * @return the model, computing with the context's ops
         * @throws IllegalArgumentException if it has no unit, or a layer is used twice
         */
        public SequentialModel build() {
            if (names.isEmpty()) {
                throw new IllegalArgumentException("a sequential model needs at least one unit");
            }
            return new SequentialModel(this);
        }
    }

    /** The activations one unit's forward or backward allocated, freed together. */
    private final class Arena implements Layer.Scope {
        private final List<Tensor> tensors = new ArrayList<>();

        @Override
        public Ops ops() {
            return ops;
        }

        @Override
        public DType dtype() {
            return dtype;
        }

        @Override
        public Tensor activation(long... shape) {
            return activation(dtype, shape);
        }

        @Override
        public Tensor activation(DType d, long... shape) {
            Tensor t = ops.zeros(d, MemoryCategory.ACTIVATIONS, shape);
            tensors.add(t);
            return t;
        }

        void free() {
            tensors.forEach(Tensor::close);
            tensors.clear();
        }
    }

    private final Ops ops;
    private final DType dtype;
    private final String input;
    private final String labelsName;
    private final List<Unit> units = new ArrayList<>();
    private final List<List<Layer>> layers;
    private final List<Arena> forwardArenas = new ArrayList<>();
    private final List<Arena> backwardArenas = new ArrayList<>();
    private Tensor logits;
    private Tensor labels;

    private SequentialModel(Builder b) {
        this.ops = b.ctx.ops();
        this.dtype = b.ctx.computeDtype();
        this.input = b.input;
        this.labelsName = b.labels;
        this.layers = List.copyOf(b.layers);
        List<Layer> seen = new ArrayList<>();
        for (int u = 0; u < b.names.size(); u++) {
            List<ParamSpec> specs = new ArrayList<>();
            List<Layer> flat = new ArrayList<>();
            for (int i = 0; i < layers.get(u).size(); i++) {
                place(layers.get(u).get(i), b.names.get(u) + "." + i, specs, flat);
            }
            for (Layer l : flat) {
                if (seen.stream().anyMatch(x -> x == l)) {
                    throw new IllegalArgumentException("a layer instance is used twice (unit " + b.names.get(u)
                            + "): build a new one for every place");
                }
                seen.add(l);
            }
            Unit unit = new Unit(b.names.get(u), u, specs);
            flat.forEach(l -> l.bind(unit));
            units.add(unit);
            forwardArenas.add(new Arena());
            backwardArenas.add(new Arena());
        }
    }

    /** Lays out {@code l} and its children depth-first, their parameters after those in {@code specs}. */
    private static void place(Layer l, String prefix, List<ParamSpec> specs, List<Layer> flat) {
        specs.addAll(l.place(specs.size(), prefix));
        flat.add(l);
        List<Layer> children = l.children();
        for (int i = 0; i < children.size(); i++) {
            place(children.get(i), prefix + "." + i, specs, flat);
        }
    }

    /**
     * A builder for a model reading {@code input} and scored against {@code labels}.
     *
     * @param ctx    the rank's context (from the {@link ModelFactory})
     * @param input  the batch field the first layer reads
     * @param labels the batch field of class indices (I32)
     * @return a new builder
     */
    public static Builder builder(ModelContext ctx, String input, String labels) {
        return new Builder(ctx, input, labels);
    }

    @Override
    public List<Unit> units() {
        return units;
    }

    @Override
    public void forward(Inputs inputs, UnitHooks hooks, Tensor loss) {
        close();
        Tensor x = inputs.get(input);
        labels = inputs.get(labelsName);
        for (int u = 0; u < units.size(); u++) {
            hooks.preForward(units.get(u));
            for (Layer l : layers.get(u)) {
                x = l.forward(forwardArenas.get(u), x);
            }
            hooks.postForward(units.get(u));
        }
        if (x.rank() < 2 || x.numel() / x.dim(-1) != labels.numel()) {
            throw new IllegalArgumentException("the last unit's output " + x + " is not one row of logits per label of "
                    + labels);
        }
        logits = x;
        Tensor losses = forwardArenas.get(units.size() - 1).activation(DType.F32, labels.numel());
        CrossEntropyLoss.forward(ops, logits, labels, losses, loss);
    }

    @Override
    public void backward(UnitHooks hooks, float lossScale) {
        if (logits == null) {
            throw new IllegalStateException("backward called without a forward (or twice for one forward)");
        }
        CrossEntropyLoss.backwardInPlace(ops, logits, labels, lossScale);   // logits := dlogits
        Tensor d = logits;
        for (int u = units.size() - 1; u >= 0; u--) {
            hooks.preBackward(units.get(u));
            List<Layer> ls = layers.get(u);
            for (int i = ls.size() - 1; i >= 0; i--) {
                d = ls.get(i).backward(backwardArenas.get(u), d, u > 0 || i > 0);
            }
            hooks.postBackward(units.get(u));
            forwardArenas.get(u).free();
            if (u + 1 < units.size()) {
                backwardArenas.get(u + 1).free();   // its dx was this unit's dy
            }
        }
        backwardArenas.get(0).free();
        logits = null;
    }

    @Override
    public void close() {
        forwardArenas.forEach(Arena::free);
        backwardArenas.forEach(Arena::free);
        logits = null;
    }
}
