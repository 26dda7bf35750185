// Unsharded parameter storage for tests: the whole model on one backend, what the FSDP tests
// compare against (and what samples' tests read loaded weights back through). Per unit, one flat fp32 parameter buffer (PARAMS) and one flat gradient
// buffer (GRADS), with each parameter a view at its offset (llm.c's layout), bound to the unit
// for the store's whole life. Host get/set by name serve weight loading and tests.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamInit;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;
import org.fsdp4j.optim.OptimizerState;

public final class ParameterStore implements AutoCloseable {

    /** One parameter: its unit, its index in the unit, its spec and its parameter and gradient views. */
    public record Entry(Unit unit, int indexInUnit, ParamSpec spec, Tensor param, Tensor grad) {
    }

    private final Ops backend;
    private final List<Unit> units;
    private final List<Tensor> flatParams;   // per unit (numel of the unit) fp32
    private final List<Tensor> flatGrads;    // per unit (numel of the unit) fp32
    private final Map<String, Entry> entries = new LinkedHashMap<>();
    private boolean closed;

    /** Allocates and binds parameter and gradient buffers for every unit; values are undefined until initialize/set. */
    public ParameterStore(Ops backend, List<Unit> units) {
        this.backend = backend;
        this.units = List.copyOf(units);
        List<Tensor> params = new ArrayList<>();
        List<Tensor> grads = new ArrayList<>();
        for (Unit unit : this.units) {
            Tensor flatParam = backend.allocate(DType.F32, MemoryCategory.PARAMS, unit.numel());   // (unit numel)
            Tensor flatGrad = backend.zeros(DType.F32, MemoryCategory.GRADS, unit.numel());        // (unit numel)
            params.add(flatParam);
            grads.add(flatGrad);
            List<Tensor> paramViews = new ArrayList<>();
            List<Tensor> gradViews = new ArrayList<>();
            long offset = 0;
            for (int i = 0; i < unit.params().size(); i++) {
                ParamSpec spec = unit.params().get(i);
                Tensor p = flatParam.view(offset, spec.shape());
                Tensor g = flatGrad.view(offset, spec.shape());
                paramViews.add(p);
                gradViews.add(g);
                offset += spec.numel();
                if (entries.put(spec.name(), new Entry(unit, i, spec, p, g)) != null) {
                    throw new IllegalArgumentException("parameter name " + spec.name() + " appears twice");
                }
            }
            unit.bindParams(paramViews);
            unit.bindGrads(gradViews);
        }
        this.flatParams = List.copyOf(params);
        this.flatGrads = List.copyOf(grads);
    }

    public List<Unit> units() {
        return units;
    }

    /** Every parameter in unit order, then parameter order. */
    public List<Entry> entries() {
        return List.copyOf(entries.values());
    }

    /** The parameter called {@code name}; an unknown name is an error. */
    public Entry entry(String name) {
        Entry e = entries.get(name);
        if (e == null) {
            throw new IllegalArgumentException("no parameter named '" + name + "'; known: "
                    + String.join(", ", entries.keySet()));
        }
        return e;
    }

    /** Unit {@code unitIndex}'s flat parameter buffer (its parameters end to end). */
    public Tensor flatParams(int unitIndex) {
        return flatParams.get(unitIndex);
    }

    /** Unit {@code unitIndex}'s flat gradient buffer. */
    public Tensor flatGrads(int unitIndex) {
        return flatGrads.get(unitIndex);
    }

    /** Total number of parameters. */
    public long numel() {
        long n = 0;
        for (Unit u : units) {
            n += u.numel();
        }
        return n;
    }

    /** Sets every parameter with ParamInit (the values FSDP shards reproduce) and zeroes the gradients. */
    public void initialize(long seed) {
        initialize(ParamSource.seeded(seed));
    }

    /** Sets every parameter from {@code source} (seeded values or loaded weights) and zeroes the gradients. */
    public void initialize(ParamSource source) {
        for (Entry e : entries.values()) {
            float[] values = new float[Math.toIntExact(e.spec().numel())];
            source.fill(e.spec(), 0, values, 0, values.length);
            backend.copyFromHost(values, 0, e.param());
        }
        zeroGrads();
    }

    public void zeroGrads() {
        for (Tensor g : flatGrads) {
            backend.fill(g, 0f);
        }
    }

    /** The values of parameter {@code name}, row-major. */
    public float[] get(String name) {
        return backend.toHost(entry(name).param());
    }

    /** The gradient of parameter {@code name}, row-major. */
    public float[] grad(String name) {
        return backend.toHost(entry(name).grad());
    }

    /** Sets parameter {@code name} from row-major values (e.g. weights exported from PyTorch). */
    public void set(String name, float[] values) {
        Entry e = entry(name);
        if (values.length != e.spec().numel()) {
            throw new IllegalArgumentException("parameter " + e.spec() + " has " + e.spec().numel()
                    + " elements, got " + values.length + " values");
        }
        backend.copyFromHost(values, 0, e.param());
    }

    /** What an optimizer updates: every parameter, its gradient, and whether it is decayed. */
    public List<OptimizerState.Target> optimizerTargets() {
        List<OptimizerState.Target> targets = new ArrayList<>();
        for (Entry e : entries.values()) {
            targets.add(new OptimizerState.Target(e.param(), e.grad(), e.spec().weightDecay()));
        }
        return Collections.unmodifiableList(targets);
    }

    /** Unbinds the units and frees both buffers of each. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (Unit u : units) {
            u.unbindParams();
            u.unbindGrads();
        }
        flatParams.forEach(Tensor::close);
        flatGrads.forEach(Tensor::close);
    }
}
