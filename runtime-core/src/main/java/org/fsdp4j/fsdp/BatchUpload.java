// Moves a slice of a host Batch onto a rank's device as the model's Inputs: samples
// [first, first + count) of every field, one tensor per field (tracked as ACTIVATIONS, freed
// after the step in stream order).
package org.fsdp4j.fsdp;

import java.util.LinkedHashMap;
import java.util.Map;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class BatchUpload {

    private BatchUpload() {
    }

    /** Samples [first, first + count) of every field of {@code batch}, on {@code device}. */
    static Inputs rows(Ops device, Batch batch, int first, int count) {
        Map<String, Tensor> tensors = new LinkedHashMap<>();
        try {
            for (Batch.Field f : batch.fields()) {
                long[] shape = f.shape();
                shape[0] = count;
                Tensor t = device.allocate(f.dtype(), MemoryCategory.ACTIVATIONS, shape);
                tensors.put(f.name(), t);
                int offset = Math.toIntExact(first * f.sampleElements());
                if (f.dtype() == org.fsdp4j.api.DType.I32) {
                    device.copyFromHost(f.ints(), offset, t);
                } else {
                    device.copyFromHost(f.floats(), offset, t);
                }
            }
            return Inputs.of(tensors);
        } catch (RuntimeException e) {
            tensors.values().forEach(Tensor::close);
            throw e;
        }
    }

    /** Frees the tensors of {@code inputs} (made by rows). */
    static void free(Inputs inputs) {
        for (String name : inputs.names()) {
            inputs.get(name).close();
        }
    }
}
