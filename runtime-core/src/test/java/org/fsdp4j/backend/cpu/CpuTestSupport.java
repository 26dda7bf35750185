// Shared by the CPU backend tests: a fresh random seed per test (printed in every failure),
// tensors filled from random values rounded to their dtype (the reference sees exactly what
// the backend sees), NaN-poisoned outputs, and the |got − ref| ≤ atol + rtol·|ref| check.
package org.fsdp4j.backend.cpu;

import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.testing.Tolerances;

final class CpuTestSupport implements AutoCloseable {

    final long seed = System.nanoTime();
    final Random random = new Random(seed);
    final MemoryTracker tracker = new MemoryTracker("test");
    final Backend backend;

    CpuTestSupport(int threads) {
        backend = new CpuBackendProvider().create(org.fsdp4j.api.Device.CPU, tracker,
                new org.fsdp4j.backend.BackendOptions(threads, false));
    }

    CpuTestSupport() {
        this(2);
    }

    /** Tolerance per dtype for one rounding of an fp32-computed result: fp32 tight, then bf16 (8 bits) and fp16 (11 bits). */
    static double rtol(DType dtype) {
        switch (dtype) {
            case F16: return 1e-3;
            case BF16: return 8e-3;
            default: return 1e-5;
        }
    }

    /** Uniform random values in [-scale, scale). */
    double[] randoms(int n, double scale) {
        double[] x = new double[n];
        for (int i = 0; i < n; i++) {
            x[i] = (random.nextDouble() * 2 - 1) * scale;
        }
        return x;
    }

    /** A tensor holding {@code values} rounded to dtype; {@code values} is overwritten with the rounded values. */
    Tensor tensor(DType dtype, double[] values, long... shape) {
        Tensor t = backend.allocate(dtype, MemoryCategory.ACTIVATIONS, shape);
        float[] f = new float[values.length];
        for (int i = 0; i < f.length; i++) {
            f[i] = dtype.round((float) values[i]);
            values[i] = f[i];
        }
        backend.copyFromHost(f, 0, t);
        return t;
    }

    /** A random tensor; returns it and leaves its (rounded) values in {@code out[0]}. */
    Tensor random(DType dtype, double scale, double[][] out, long... shape) {
        double[] v = randoms(Math.toIntExact(Tensor.numelOf(shape)), scale);
        out[0] = v;
        return tensor(dtype, v, shape);
    }

    /** A tensor every element of which is NaN, so an element the op forgets to write fails the check. */
    Tensor poisoned(DType dtype, long... shape) {
        Tensor t = backend.allocate(dtype, MemoryCategory.ACTIVATIONS, shape);
        backend.fill(t, Float.NaN);
        return t;
    }

    Tensor ints(int[] values, long... shape) {
        Tensor t = backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, shape);
        backend.copyFromHost(values, 0, t);
        return t;
    }

    double[] read(Tensor t) {
        float[] f = backend.toHost(t);
        double[] d = new double[f.length];
        for (int i = 0; i < f.length; i++) {
            d[i] = f[i];
        }
        return d;
    }

    /** Fails naming the seed, the first bad index and the tolerance if any |got − ref| > atol + rtol·|ref|. */
    void assertClose(String what, double[] ref, Tensor got, double atol, double rtol) {
        assertClose(what, ref, read(got), atol, rtol);
    }

    void assertClose(String what, double[] ref, double[] got, double atol, double rtol) {
        Tolerances.assertClose(what, ref, got, atol, rtol, seed);
    }

    @Override
    public void close() {
        backend.close();
    }
}
