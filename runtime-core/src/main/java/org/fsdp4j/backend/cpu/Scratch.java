// Per-thread float[] scratch for the chunk loops, so a chunk does not allocate (and zero) its
// buffers every time. A float array has room for one more whole vector past the length asked
// for, so the fp64 loops may load whole F vectors up to the end (Simd.wideEnd). A chunk body uses distinct slots for the buffers it needs at once; no
// body runs inside another on the same thread, so a slot is never shared.
package org.fsdp4j.backend.cpu;

final class Scratch {

    static final int SLOTS = 7;

    private static final ThreadLocal<float[][]> FLOATS = ThreadLocal.withInitial(() -> new float[SLOTS][]);
    private static final ThreadLocal<int[]> INTS = ThreadLocal.withInitial(() -> new int[0]);

    private Scratch() {
    }

    /** A float[] of at least {@code length} + Simd.FL elements, private to this thread and slot; contents undefined. */
    static float[] floats(int slot, int length) {
        float[][] slots = FLOATS.get();
        float[] a = slots[slot];
        if (a == null || a.length < length + Simd.FL) {
            a = new float[length + Simd.FL];
            slots[slot] = a;
        }
        return a;
    }

    static int[] ints(int length) {
        int[] a = INTS.get();
        if (a.length < length) {
            a = new int[length];
            INTS.set(a);
        }
        return a;
    }
}
