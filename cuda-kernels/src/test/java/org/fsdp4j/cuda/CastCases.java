// Emulator cases for casts.cu through CastLauncher: every pair of float dtypes, values rounded
// once on the store (RNE, as DType rounds), so the reference is exact: ties, fp16 overflow
// (65504 stays, 65520 goes to inf), fp16 subnormals and underflow, ±0, ±inf and NaN.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.BackendConformanceTest.FLOATS;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class CastCases {

    private static final double[] EDGES = {0.0, -0.0, 65504, 65519.99, 65520, -1e5, 6e-8, 2.98e-8, 1e-8,
        1 + 0x1p-8, 1 + 3 * 0x1p-8, 3.4e38, 1e-40, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.NaN};

    private CastCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        for (DType from : FLOATS) {
            for (DType to : FLOATS) {
                out.add(cast(r, from, to, 1000));
            }
        }
        out.add(cast(r, DType.F32, DType.BF16, 1));
        return out;
    }

    private static EmuCase cast(Random r, DType from, DType to, int n) {
        EmuCase c = new EmuCase("cast_kernel", from + "->" + to + " n=" + n);
        Tensor src = c.device.allocate(from, n);
        Tensor dst = c.device.allocate(to, n);
        double[] v = EmuData.uniform(r, n, 4);
        for (int i = 0; i < n; i += 7) {
            v[i] *= 1e5;   // some beyond fp16's range
        }
        double[] x = c.device.put(src, n > 2 * EDGES.length ? EmuData.withEdges(v, EDGES) : v);
        new CastLauncher(c.device).cast(null, src, dst);
        c.expectExact("dst", dst, x);
        return c;
    }
}
