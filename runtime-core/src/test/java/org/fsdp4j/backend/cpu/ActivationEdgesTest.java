// The CPU backend's GELU and SwiGLU, forward and backward, at the inputs where fp32 formulas go
// wrong (huge, infinite, NaN, around the exp clamp), against the fp64 functions and their limits
// (ActivationReference), each edge in every vector lane and in the scalar tail.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.function.DoubleUnaryOperator;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.junit.jupiter.api.Test;

class ActivationEdgesTest {

    /**
     * Relative error allowed: the exp's argument (up to ~150 near the clamp) carries a few fp32
     * roundings, each an absolute error in the exponent, so a few hundred ulps of the result.
     */
    private static final double RTOL = 0x1p-13;
    /** Absolute error allowed where the result is subnormal: a few of fp32's smallest steps. */
    private static final double ATOL = 8 * 0x1p-149;

    /** Every edge at every vector lane (rows of the edges rotated by one), plus a scalar tail. */
    private static float[] inputs() {
        int e = ActivationReference.EDGES.length;
        int n = e * (Simd.FL + 1) + 5;
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = ActivationReference.EDGES[(i % e + i / e) % e];
        }
        return x;
    }

    @Test
    void geluIsRightAtEveryEdge() {
        float[] x = inputs();
        int n = x.length;
        try (Backend be = backend();
             Tensor in = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor out = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor g = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor d = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n)) {
            be.copyFromHost(x, 0, in);
            be.fill(g, 1f);
            be.fill(d, 0f);
            be.geluForward(in, out);
            be.geluBackward(in, g, d);
            List<String> bad = new ArrayList<>();
            check("GELU", x, be.toHost(out), ActivationReference::gelu, bad);
            check("GELU'", x, be.toHost(d), ActivationReference::geluGrad, bad);
            assertTrue(bad.isEmpty(), String.join("\n", bad));
        }
    }

    @Test
    void swigluIsRightAtEveryEdge() {
        float[] x = inputs();
        int n = x.length;
        try (Backend be = backend();
             Tensor gate = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor up = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor out = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor dout = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor dgate = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor dup = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n)) {
            be.copyFromHost(x, 0, gate);
            be.fill(up, 1f);
            be.fill(dout, 1f);
            be.fill(dgate, 0f);
            be.fill(dup, 0f);
            be.swigluForward(gate, up, out);
            be.swigluBackward(gate, up, dout, dgate, dup);
            List<String> bad = new ArrayList<>();
            check("SiLU", x, be.toHost(out), ActivationReference::silu, bad);
            check("SiLU'", x, be.toHost(dgate), ActivationReference::siluGrad, bad);
            check("SiLU (backward's dup)", x, be.toHost(dup), ActivationReference::silu, bad);
            assertTrue(bad.isEmpty(), String.join("\n", bad));
        }
    }

    @Test
    void tailConstantIsTheOneTheKernelsSpell() {
        // common.cuh writes e^−64 as this literal, so both backends scale their tails by the same float
        assertEquals(1.6038109e-28f, FloatExp.EXP_MINUS_TAIL_SHIFT);
        assertEquals((float) Math.exp(-64), FloatExp.EXP_MINUS_TAIL_SHIFT);
    }

    private static Backend backend() {
        return new CpuBackendProvider().create(Device.CPU, new MemoryTracker("activation-edges"), new BackendOptions(1, false));
    }

    /** Adds one line per distinct edge whose result is wrong. */
    private static void check(String what, float[] x, float[] got, DoubleUnaryOperator ref, List<String> bad) {
        List<Float> seen = new ArrayList<>();
        for (int i = 0; i < x.length; i++) {
            double want = ref.applyAsDouble(x[i]);
            boolean ok = Double.isNaN(want) ? Float.isNaN(got[i])
                    : Double.isInfinite(want) ? got[i] == want
                    : Math.abs(got[i] - want) <= RTOL * Math.abs(want) + ATOL;
            if (!ok && !seen.contains(x[i])) {
                seen.add(x[i]);
                bad.add(what + "(" + x[i] + ") = " + got[i] + ", expected " + want + " (index " + i + ")");
            }
        }
    }
}
