// Allocation of the model's activation buffers (always tracked as ACTIVATIONS) and null-tolerant
// release, shared by every layer so the category is set in one place. Activations take the dtype
// of what they are computed from (the parameters' dtype flows from the embedding through every
// block, as a module cast to bf16 computes in bf16); statistics (LayerNorm's mean and rstd, the
// per-position losses) are always fp32.
package org.fsdp4j.model;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

final class Buffers {

    private Buffers() {
    }

    /** An activation buffer with undefined contents (for outputs that are fully overwritten). */
    static Tensor activation(Ops backend, DType dtype, long... shape) {
        return backend.allocate(dtype, MemoryCategory.ACTIVATIONS, shape);
    }

    /** An activation buffer set to zero (for gradients, which backward ops accumulate into). */
    static Tensor zeroedActivation(Ops backend, DType dtype, long... shape) {
        return backend.zeros(dtype, MemoryCategory.ACTIVATIONS, shape);
    }

    /** An fp32 buffer of per-row statistics, undefined contents. */
    static Tensor statistics(Ops backend, long... shape) {
        return backend.allocate(DType.F32, MemoryCategory.ACTIVATIONS, shape);
    }

    /** Closes each owner that is not null. */
    static void close(AutoCloseable... owners) {
        for (AutoCloseable o : owners) {
            if (o != null) {
                try {
                    o.close();
                } catch (Exception e) {
                    throw new IllegalStateException("failed to free an activation buffer", e);
                }
            }
        }
    }

    /** Throws unless {@code t} has exactly {@code shape}; {@code what} names the buffer in the message. */
    static void requireShape(Tensor t, String what, long... shape) {
        Tensor.requireShape(t, what, shape);
    }
}
