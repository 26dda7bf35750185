// Test plumbing for backend-vs-reference checks: a fresh seed per test (printed in every
// failure), random host values rounded to the tensor's dtype (so the fp64 reference sees
// exactly what the backend sees), NaN-poisoned outputs, and |got − ref| ≤ atol + rtol·|ref|.
package org.fsdp4j.cuda;

import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.testing.Tolerances;

final class OpCheck {

    final long seed = System.nanoTime();
    final Random random = new Random(seed);

    /**
     * Relative tolerance for a result computed in fp32 and rounded once to {@code d}: half an
     * ulp of the dtype (2^-8 bf16, 2^-11 fp16) with headroom, and fp32 allowing for summation
     * order differences between backends.
     */
    static double rtol(DType d) {
        switch (d) {
            case F16: return 1e-3;
            case BF16: return 8e-3;
            default: return 2e-5;
        }
    }

    /** Uniform in [-scale, scale), rounded to {@code d}. */
    double[] values(DType d, int n, double scale) {
        double[] v = new double[n];
        for (int i = 0; i < n; i++) {
            v[i] = d.round((float) ((random.nextDouble() * 2 - 1) * scale));
        }
        return v;
    }

    static Tensor put(Backend be, DType d, double[] v, long... shape) {
        Tensor t = be.allocate(d, MemoryCategory.ACTIVATIONS, shape);
        float[] f = new float[v.length];
        for (int i = 0; i < v.length; i++) {
            f[i] = (float) v[i];
        }
        be.copyFromHost(f, 0, t);
        return t;
    }

    static Tensor ints(Backend be, int[] v, long... shape) {
        Tensor t = be.allocate(DType.I32, MemoryCategory.ACTIVATIONS, shape);
        be.copyFromHost(v, 0, t);
        return t;
    }

    /** Every element NaN, so an element an op forgets to write fails the check. */
    static Tensor poisoned(Backend be, DType d, long... shape) {
        Tensor t = be.allocate(d, MemoryCategory.ACTIVATIONS, shape);
        be.fill(t, Float.NaN);
        return t;
    }

    static double[] read(Backend be, Tensor t) {
        float[] f = be.toHost(t);
        double[] d = new double[f.length];
        for (int i = 0; i < f.length; i++) {
            d[i] = f[i];
        }
        return d;
    }

    void assertClose(String what, double[] ref, double[] got, double atol, double rtol) {
        Tolerances.assertClose(what, ref, got, atol, rtol, seed);
    }

    void assertClose(String what, double[] ref, Backend be, Tensor got, double atol, double rtol) {
        assertClose(what + " on " + be.device(), ref, read(be, got), atol, rtol);
    }
}
