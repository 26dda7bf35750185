// Allocation of the model's activation buffers (always fp32, always tracked as ACTIVATIONS)
// and null-tolerant release, shared by every layer so the category is set in one place.
package org.fsdp4j.model;

import java.util.Arrays;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.Tensor;

final class Buffers {

    private Buffers() {
    }

    /** An fp32 activation buffer with undefined contents (for outputs that are fully overwritten). */
    static Tensor activation(Backend backend, long... shape) {
        return backend.allocate(DType.F32, MemoryCategory.ACTIVATIONS, shape);
    }

    /** An fp32 activation buffer set to zero (for gradients, which backward ops accumulate into). */
    static Tensor zeroedActivation(Backend backend, long... shape) {
        return backend.zeros(DType.F32, MemoryCategory.ACTIVATIONS, shape);
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
        if (!Arrays.equals(t.shape(), shape)) {
            throw new IllegalArgumentException(what + " must have shape " + Arrays.toString(shape) + ", got "
                    + Arrays.toString(t.shape()));
        }
    }
}
