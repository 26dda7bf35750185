// Bulk element access to one CPU tensor, in fp32: every op of the CPU backend moves rows or
// chunks between a tensor and float[] scratch through here, so the dtype is dispatched once
// per row/chunk (not per element), F32 moves are memcpy, and F16/BF16 are widened and
// rounded (RNE) in one place. Indices are element indices within the tensor.
package org.fsdp4j.backend.cpu;

import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class Elements {

    final Tensor tensor;
    final DType dtype;
    private final FloatBuffer floats;
    private final ShortBuffer shorts;
    private final IntBuffer ints;
    private final int base;   // index of the tensor's first element in the storage's views

    private Elements(Tensor t) {
        CpuStorage s = CpuStorage.of(t);
        this.tensor = t;
        this.dtype = t.dtype();
        this.floats = s.floats();
        this.shorts = s.shorts();
        this.ints = s.ints();
        this.base = Math.toIntExact(t.offset());
    }

    static Elements of(Tensor t) {
        return new Elements(t);
    }

    /** dst[dstOff .. dstOff+n) = this[start .. start+n) widened to fp32. */
    void load(long start, float[] dst, int dstOff, int n) {
        int i0 = base + (int) start;
        switch (dtype) {
            case F32:
                floats.get(i0, dst, dstOff, n);
                break;
            case F16:
                for (int i = 0; i < n; i++) {
                    dst[dstOff + i] = HalfTables.halfToFloat(shorts.get(i0 + i));
                }
                break;
            case BF16:
                for (int i = 0; i < n; i++) {
                    dst[dstOff + i] = Float.intBitsToFloat(shorts.get(i0 + i) << 16);
                }
                break;
            default:
                throw notFloating();
        }
    }

    /** this[start .. start+n) = src[srcOff .. srcOff+n) rounded (RNE) to this dtype. */
    void store(float[] src, int srcOff, long start, int n) {
        int i0 = base + (int) start;
        switch (dtype) {
            case F32:
                floats.put(i0, src, srcOff, n);
                break;
            case F16:
                for (int i = 0; i < n; i++) {
                    shorts.put(i0 + i, DType.floatToHalf(src[srcOff + i]));
                }
                break;
            case BF16:
                for (int i = 0; i < n; i++) {
                    shorts.put(i0 + i, DType.floatToBf16(src[srcOff + i]));
                }
                break;
            default:
                throw notFloating();
        }
    }

    /** The whole tensor in fp32 (for small operands: biases, norm weights). */
    float[] loadAll() {
        return loadAll(0);
    }

    /** loadAll in an array {@code room} elements longer (zeros), for loops that load whole vectors near the end. */
    float[] loadAll(int room) {
        int n = Math.toIntExact(tensor.numel());
        float[] a = new float[n + room];
        load(0, a, 0, n);
        return a;
    }

    /**
     * The whole I32 tensor {@code t} as indices into [0, bound); an index outside is an error
     * naming the op, the value and where it sits ("token 7 at position 3").
     */
    static int[] loadIndices(String op, Tensor t, long bound, String what, String where) {
        int[] idx = new int[Math.toIntExact(t.numel())];
        of(t).loadInts(0, idx, 0, idx.length);
        for (int i = 0; i < idx.length; i++) {
            if (idx[i] < 0 || idx[i] >= bound) {
                throw new IllegalArgumentException(op + ": " + what + " " + idx[i] + " at " + where + " " + i
                        + " is outside the vocabulary [0, " + bound + ")");
            }
        }
        return idx;
    }

    /** dst[dstOff ..] = this[start .. start+n) for an I32 tensor. */
    void loadInts(long start, int[] dst, int dstOff, int n) {
        requireInts();
        ints.get(base + (int) start, dst, dstOff, n);
    }

    void storeInts(int[] src, int srcOff, long start, int n) {
        requireInts();
        ints.put(base + (int) start, src, srcOff, n);
    }

    private void requireInts() {
        if (dtype != DType.I32) {
            throw new IllegalArgumentException("expected an int32 tensor, got " + tensor);
        }
    }

    private IllegalArgumentException notFloating() {
        return new IllegalArgumentException("expected a floating tensor (fp32, fp16, bf16), got " + tensor);
    }
}
