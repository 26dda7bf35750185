// The vector loops must give the scalar code's bits lane by lane (Simd's contract): the vector
// exp against FloatExp over the whole argument range, edges and NaN included, and the GELU, whose
// vector body and scalar tail must agree wherever an element falls, its rare tail lanes included.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.junit.jupiter.api.Test;

class SimdTest {

    @Test
    void vectorExpHasTheScalarBits() {
        Random r = new Random();
        float[] x = new float[Simd.FL * 4096];
        for (int i = 0; i < x.length; i++) {
            x[i] = (r.nextFloat() * 2 - 1) * 100f;   // past both clamps
        }
        float[] edges = {0f, -0f, 1e-30f, -1e-30f, FloatExp.MIN_ARG, FloatExp.MAX_ARG, Float.NaN,
            Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MIN_VALUE, 88.7f, -87.3f};
        System.arraycopy(edges, 0, x, 0, edges.length);
        float[] out = x.clone();
        Simd.expInPlace(out, 0, out.length);
        for (int i = 0; i < x.length; i++) {
            assertEquals(Float.floatToRawIntBits(FloatExp.exp(x[i])), Float.floatToRawIntBits(out[i]), "exp(" + x[i] + ")");
        }
    }

    @Test
    void geluVectorBodyAndScalarTailAgree() {
        // one GELU over n elements, and the same values shifted by one so that every element
        // that ran in a vector lane now runs in the other code path at some shift
        Random r = new Random();
        float[] edges = ActivationReference.EDGES;
        int n = 3 * edges.length + 3 * Simd.FL + 5;
        float[] v = new float[n + 1];
        for (int i = 0; i < v.length; i++) {
            // every third element an edge (huge, infinite, NaN, past the exp clamp), so that vectors
            // take the blended tails as well as the plain formula
            v[i] = i % 3 == 1 ? edges[(i / 3) % edges.length] : (float) r.nextGaussian() * 4f;
        }
        try (Backend be = new CpuBackendProvider().create(Device.CPU, new MemoryTracker("simd"), new BackendOptions(1, false));
             Tensor in = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n + 1);
             Tensor out = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n + 1);
             Tensor g = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n + 1);
             Tensor d = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n + 1)) {
            be.copyFromHost(v, 0, in);
            be.fill(g, 1.5f);
            be.fill(d, 0f);
            be.geluForward(in, out);
            be.geluBackward(in, g, d);
            float[] whole = be.toHost(out);
            float[] wholeD = be.toHost(d);
            be.fill(d, 0f);
            be.geluForward(in.view(1, n), out.view(1, n));
            be.geluBackward(in.view(1, n), g.view(1, n), d.view(1, n));
            float[] shifted = be.toHost(out);
            float[] shiftedD = be.toHost(d);
            for (int i = 1; i <= n; i++) {
                assertEquals(Float.floatToIntBits(whole[i]), Float.floatToIntBits(shifted[i]), "gelu(" + v[i] + ")");
                assertEquals(Float.floatToIntBits(wholeD[i]), Float.floatToIntBits(shiftedD[i]), "gelu'(" + v[i] + ")");
            }
        }
    }
}
