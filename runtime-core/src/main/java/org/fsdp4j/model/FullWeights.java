// A model's whole parameters on one device, read from a ParamSource (pretrained safetensors weights,
// a checkpoint's consolidated values, a seeded initialisation) and bound to its units for this
// holder's life: what decoding on one device (fsdp4j generate) runs with, without the FSDP engine.
// No gradients are bound: a model holding these can decode, not train.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;

public final class FullWeights implements AutoCloseable {

    private static final int CHUNK = 1 << 22;   // elements read from the source per host round trip (16 MiB of fp32)

    private final List<Unit> units;
    private final List<Tensor> tensors = new ArrayList<>();   // one per parameter, of its spec's shape, in dtype

    private FullWeights(List<Unit> units) {
        this.units = units;
    }

    /**
     * Every parameter of {@code model} read from {@code source} (checked against the model's specs
     * first, so a source that does not fit fails before anything is read), stored in {@code dtype}
     * (rounded to nearest even from the source's fp32) on the model's device and bound to its units.
     * Closing the result unbinds and frees them.
     */
    public static FullWeights bind(DecoderModel<?> model, ParamSource source, DType dtype) {
        Ops ops = model.ops();
        List<ParamSpec> all = new ArrayList<>();
        for (Unit u : model.units()) {
            all.addAll(u.params());
        }
        source.check(all);
        FullWeights w = new FullWeights(model.units());
        try {
            float[] host = new float[CHUNK];
            for (Unit u : model.units()) {
                List<Tensor> bound = new ArrayList<>();
                for (ParamSpec spec : u.params()) {
                    Tensor t = ops.allocate(dtype, MemoryCategory.PARAMS, spec.shape());
                    w.tensors.add(t);
                    for (long first = 0; first < spec.numel(); first += CHUNK) {
                        int count = (int) Math.min(CHUNK, spec.numel() - first);
                        source.fill(spec, first, host, 0, count);
                        ops.copyFromHost(host, 0, t.view(first, count));
                    }
                    bound.add(t);
                }
                u.bindParams(bound);
            }
            return w;
        } catch (RuntimeException e) {
            w.close();
            throw e;
        }
    }

    /** Parameters held (elements). */
    public long numel() {
        return tensors.stream().mapToLong(Tensor::numel).sum();
    }

    @Override
    public void close() {
        for (Unit u : units) {
            u.unbindParams();
        }
        Buffers.close(tensors.toArray(AutoCloseable[]::new));
        tensors.clear();
    }
}
