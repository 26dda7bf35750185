// Shared test plumbing for the gradient checks: the CPU backend, fresh random inputs (the seed
// is printed by every failure), host↔tensor copies, central finite differences of an fp64
// function, and the |a − b| ≤ atol + rtol·|ref| comparison that names the worst element.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.fail;

import java.util.Random;
import java.util.function.ToDoubleFunction;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;

final class GradCheck {

    /** Step of the central differences: truncation ~h²·f''' ≈ 1e-10, fp64 cancellation ~1e-16·|f|/h ≈ 1e-10. */
    static final double FD_STEP = 1e-5;

    // Tolerances of the layer checks, as |err| ≤ ATOL·max|ref| + RTOL·|ref|. The fp32 layers on
    // these small shapes (sums of ≤ 32 terms, ≤ 2 sub-layers deep) land within ~4e-7·max|ref| of the
    // fp64 values (measured over many seeds); the finite differences are good to ~1e-10. The
    // bounds leave a 5-10× margin, so a wrong index or a missing term (errors of O(max|ref|)) fails.
    static final double FORWARD_ATOL = 1e-6;
    static final double FORWARD_RTOL = 1e-5;
    static final double GRAD_ATOL = 3e-6;
    static final double GRAD_RTOL = 3e-5;

    final long seed = System.nanoTime();
    final Random random = new Random(seed);

    /**
     * Sets every parameter of {@code store} to fresh random values (the ONES-initialised ones
     * around 1, the rest around 0) and returns them widened to fp64, by name, for a reference.
     */
    java.util.Map<String, double[]> randomParams(ParameterStore store) {
        java.util.Map<String, double[]> params = new java.util.HashMap<>();
        for (ParameterStore.Entry e : store.entries()) {
            int numel = (int) e.spec().numel();
            float[] v = e.spec().init() == org.fsdp4j.api.ParamSpec.Init.ONES ? around(numel, 1, 0.3) : uniform(numel, 0.3);
            store.set(e.spec().name(), v);
            params.put(e.spec().name(), widen(v));
        }
        return params;
    }

    static Backend cpuBackend() {
        return Backends.create(Device.CPU, new MemoryTracker("test"), 2);
    }

    /** n values uniform in [−scale, scale), as floats so fp32 and fp64 paths see the same numbers. */
    float[] uniform(int n, double scale) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) ((random.nextDouble() * 2 - 1) * scale);
        }
        return x;
    }

    /** n values uniform in [center − spread, center + spread). */
    float[] around(int n, double center, double spread) {
        float[] x = uniform(n, spread);
        for (int i = 0; i < n; i++) {
            x[i] += (float) center;
        }
        return x;
    }

    int[] tokens(int n, int vocab) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(vocab);
        }
        return t;
    }

    static double[] widen(float[] x) {
        double[] d = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            d[i] = x[i];
        }
        return d;
    }

    static Tensor upload(Backend backend, float[] values, long... shape) {
        Tensor t = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, shape);
        backend.copyFromHost(values, 0, t);
        return t;
    }

    static Tensor upload(Backend backend, int[] values, long... shape) {
        Tensor t = backend.allocate(DType.I32, MemoryCategory.WORKSPACE, shape);
        backend.copyFromHost(values, 0, t);
        return t;
    }

    static Tensor zeros(Backend backend, long... shape) {
        return backend.zeros(DType.F32, MemoryCategory.WORKSPACE, shape);
    }

    /** ∂f/∂x by central differences, perturbing x in place (f must read x) and restoring it. */
    static double[] finiteDifference(double[] x, ToDoubleFunction<double[]> f) {
        double[] g = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            double saved = x[i];
            x[i] = saved + FD_STEP;
            double plus = f.applyAsDouble(x);
            x[i] = saved - FD_STEP;
            double minus = f.applyAsDouble(x);
            x[i] = saved;
            g[i] = (plus - minus) / (2 * FD_STEP);
        }
        return g;
    }

    /** A forward output within the forward tolerance. */
    void assertForward(String what, float[] actual, double[] ref) {
        assertClose(what, actual, ref, FORWARD_ATOL, FORWARD_RTOL);
    }

    /** A gradient within the gradient tolerance. */
    void assertGradient(String what, float[] actual, double[] ref) {
        assertClose(what, actual, ref, GRAD_ATOL, GRAD_RTOL);
    }

    /**
     * Fails when |actual − ref| > atol·max|ref| + rtol·|ref| for any element: atol is relative to the
     * tensor's largest reference value, so one tolerance fits tensors of any scale.
     */
    void assertClose(String what, float[] actual, double[] ref, double atol, double rtol) {
        if (actual.length != ref.length) {
            fail(what + ": " + actual.length + " values, expected " + ref.length);
        }
        double maxRef = 0;
        for (double r : ref) {
            maxRef = Math.max(maxRef, Math.abs(r));
        }
        int worst = -1;
        double worstExcess = 0;
        double maxErr = 0;
        for (int i = 0; i < ref.length; i++) {
            double err = Math.abs(actual[i] - ref[i]);
            maxErr = Math.max(maxErr, err);
            double excess = err - (atol * maxRef + rtol * Math.abs(ref[i]));
            if (!(excess <= 0) && (worst < 0 || excess > worstExcess || Double.isNaN(excess))) {
                worst = i;
                worstExcess = excess;
            }
        }
        if (worst >= 0) {
            fail(String.format("%s: element %d is %.9g, reference %.9g (max |err| %.3g, max |ref| %.3g, "
                    + "atol %.1g·max|ref|, rtol %.1g; seed %d)", what, worst, actual[worst], ref[worst], maxErr,
                    maxRef, atol, rtol, seed));
        }
        if (maxRef == 0) {
            fail(what + ": the reference is all zeros, so this check would prove nothing (seed " + seed + ")");
        }
    }

    /** max |actual − ref| over the elements. */
    static double maxAbsErr(float[] actual, double[] ref) {
        double m = 0;
        for (int i = 0; i < ref.length; i++) {
            m = Math.max(m, Math.abs(actual[i] - ref[i]));
        }
        return m;
    }

    /** max |x|. */
    static double maxAbs(double[] x) {
        double m = 0;
        for (double v : x) {
            m = Math.max(m, Math.abs(v));
        }
        return m;
    }
}
