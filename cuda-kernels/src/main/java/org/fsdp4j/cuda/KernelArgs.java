// The void** array cuLaunchKernel takes: slot i points at 8 bytes holding argument i's value
// (an int or float in its low 4 bytes, a long long or device pointer in all 8). One reusable
// native block per launching thread, since CUDA copies the values at launch. Free of CUDA
// classes, so its layout is tested without a GPU.
package org.fsdp4j.cuda;

import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;

final class KernelArgs {

    static final int MAX_ARGS = 24;
    private static final int SLOT_BYTES = 8;

    private final BytePointer values = new BytePointer((long) SLOT_BYTES * MAX_ARGS);
    private final PointerPointer<Pointer> slots = new PointerPointer<>(MAX_ARGS);
    private int count;

    KernelArgs() {
        for (int i = 0; i < MAX_ARGS; i++) {
            slots.put(i, values.getPointer((long) SLOT_BYTES * i));
        }
    }

    /**
     * Packs {@code args}: Integer → C int, Long → C long long or a device pointer, Float → C float.
     * The Java type must match the kernel's C parameter exactly.
     */
    KernelArgs pack(Object... args) {
        if (args.length > MAX_ARGS) {
            throw new IllegalArgumentException(args.length + " kernel arguments, at most " + MAX_ARGS);
        }
        values.fill(0);
        for (int i = 0; i < args.length; i++) {
            long at = (long) SLOT_BYTES * i;
            Object a = args[i];
            if (a instanceof Integer v) {
                values.putInt(at, v);
            } else if (a instanceof Long v) {
                values.putLong(at, v);
            } else if (a instanceof Float v) {
                values.putFloat(at, v);
            } else {
                throw new IllegalArgumentException("kernel argument " + i + " is a "
                        + (a == null ? "null" : a.getClass().getSimpleName()) + "; use Integer, Long or Float");
            }
        }
        count = args.length;
        return this;
    }

    int count() {
        return count;
    }

    PointerPointer<Pointer> slots() {
        return slots;
    }

    /** The address slot {@code i} points at (for tests). */
    long slotTarget(int i) {
        return slots.get(i).address();
    }

    /** The raw 8 bytes of slot {@code i} as a long (for tests). */
    long slotValue(int i) {
        return values.getLong((long) SLOT_BYTES * i);
    }
}
