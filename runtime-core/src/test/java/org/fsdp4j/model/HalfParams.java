// Binds half-precision copies of a store's parameters, and zeroed gradients of the same dtype,
// to every unit: what FSDP's mixed precision hands the model (gathered bf16/fp16 parameters,
// gradients reduced in that dtype); the model then computes its activations in that dtype too.
// Closing frees the copies; the store's fp32 tensors stay as they were.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;
import org.fsdp4j.backend.Backend;

final class HalfParams implements AutoCloseable {

    private final Backend backend;
    private final List<Tensor> owned = new ArrayList<>();

    /** Casts every parameter of {@code store} to {@code dtype} and binds the copies and fresh zero gradients. */
    HalfParams(Backend backend, ParameterStore store, DType dtype) {
        this.backend = backend;
        try {
            for (Unit u : store.units()) {
                List<Tensor> params = new ArrayList<>();
                List<Tensor> grads = new ArrayList<>();
                for (ParameterStore.Entry e : store.entries()) {
                    if (e.unit() == u) {
                        Tensor p = backend.allocate(dtype, MemoryCategory.GATHERED, e.spec().shape());
                        owned.add(p);
                        backend.copy(e.param(), p);
                        Tensor g = backend.zeros(dtype, MemoryCategory.GRADS, e.spec().shape());
                        owned.add(g);
                        params.add(p);
                        grads.add(g);
                    }
                }
                u.bindParams(params);
                u.bindGrads(grads);
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /** The bound (half) gradient of a store entry, widened to fp32 on the host. */
    float[] grad(ParameterStore.Entry e) {
        return backend.toHost(e.unit().grad(e.indexInUnit()));
    }

    @Override
    public void close() {
        owned.forEach(Tensor::close);
        owned.clear();
    }
}
