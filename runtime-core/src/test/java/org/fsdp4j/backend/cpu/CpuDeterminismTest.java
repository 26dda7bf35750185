// The CPU backend's results must not depend on thread scheduling or on the thread count:
// the same ops (the reductions, and the backwards that sum over rows: LayerNorm's, RMSNorm's,
// the bias's, the embedding's) and GEMMs large enough to be cut into one tile per thread, on the
// same inputs with 1, 2 and 3 threads give the same bits (fixed chunking, partials combined in
// order; a GEMM tile keeps the whole k-sum, and OpenBLAS computes an element the same way whatever
// the extent of the call it is in).
package org.fsdp4j.backend.cpu;

import static org.fsdp4j.testing.RandomTensors.gaussian;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class CpuDeterminismTest {

    /** Runs the reductions and accumulating backwards on one backend; returns every output, flattened. */
    private static List<double[]> run(int threads, long seed) {
        int rows = 2000;
        int c = 48;
        List<double[]> results = new ArrayList<>();
        Random r = new Random(seed);
        try (Backend be = new CpuBackendProvider().create(Device.CPU, new MemoryTracker("det"), new org.fsdp4j.backend.BackendOptions(threads, false));
             Tensor x = gaussian(be, r, rows, c); Tensor g = gaussian(be, r, rows, c); Tensor w = gaussian(be, r, c);
             Tensor dx = gaussian(be, r, rows, c); Tensor dw = gaussian(be, r, c); Tensor db = gaussian(be, r, c);
             Tensor mean = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows);
             Tensor rstd = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows);
             Tensor out = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows, c);
             Tensor tokens = be.allocate(DType.I32, MemoryCategory.ACTIVATIONS, 40, 50);
             Tensor wpe = gaussian(be, r, 50, c);
             Tensor cc = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, c, c);
             Tensor rmsOut = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows, c);
             Tensor rmsRstd = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows);
             Tensor rmsDx = gaussian(be, r, rows, c); Tensor rmsDw = gaussian(be, r, c);
             // GEMMs that 2 threads cut in rows (600 × 520) and in columns (200 × 700), 1 thread whole
             Tensor a = gaussian(be, r, 600, 301); Tensor b = gaussian(be, r, 301, 700);
             Tensor bt = gaussian(be, r, 520, 301);
             Tensor rowsCut = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, 600, 520);
             Tensor colsCut = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, 200, 700)) {
            int[] tok = new int[2000];
            for (int i = 0; i < tok.length; i++) {
                tok[i] = r.nextInt(7);
            }
            be.copyFromHost(tok, 0, tokens);
            be.layerNormForward(x, w, db, out, mean, rstd);
            be.layerNormBackward(g, x, w, mean, rstd, dx, dw, db);
            be.biasBackward(g, db);
            be.rmsNormForward(x, w, rmsOut, rmsRstd, 1e-5f);
            be.rmsNormBackward(g, x, w, rmsRstd, rmsDx, rmsDw);
            be.embeddingBackward(tokens, g.reshape(40, 50, c), x.view(0, 7, c), wpe);
            be.gemm(true, false, c, c, rows, 1f, x, g, 0f, cc);
            results.add(new double[] {be.sumOfSquares(g), be.sum(x)});
            be.gemm(false, true, 600, 520, 301, 1f, a, bt, 0f, rowsCut);
            be.gemm(false, false, 200, 700, 301, 1f, a.view(0, 200, 301), b, 0f, colsCut);
            for (Tensor t : new Tensor[] {out, mean, rstd, dx, dw, db, x, wpe, cc, rmsOut, rmsRstd, rmsDx, rmsDw,
                    rowsCut, colsCut}) {
                float[] f = be.toHost(t);
                double[] d = new double[f.length];
                for (int i = 0; i < f.length; i++) {
                    d[i] = f[i];
                }
                results.add(d);
            }
        }
        return results;
    }


    @Test
    void sameBitsForAnyThreadCount() {
        long seed = System.nanoTime();
        List<double[]> one = run(1, seed);
        for (int threads : new int[] {2, 3}) {
            List<double[]> many = run(threads, seed);
            assertEquals(one.size(), many.size());
            for (int i = 0; i < one.size(); i++) {
                assertArrayEquals(one.get(i), many.get(i), 0.0, "output " + i + " with " + threads
                        + " threads differs from 1 thread (seed " + seed + ")");
            }
        }
    }
}
