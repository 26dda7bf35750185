// Times the backend's GEMM on square and rectangular sizes, nccl-tests style: warm-up calls,
// then timed calls (median), then a correctness check of sampled entries against an fp64 dot
// product of the same (dtype-rounded) inputs. Written against Backend only, so the same
// program measures the CPU backend and, with --device cuda, the CUDA one.
package org.fsdp4j.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.metrics.Flops;
import org.fsdp4j.metrics.Stats;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.Tensor;

public final class GemmBenchmark {

    /** Entries of C checked against the fp64 reference per size. */
    private static final int CHECKED_ENTRIES = 64;

    /**
     * One row of the table.
     *
     * @param maxRelError the largest |c − ref| / Σ_k |a_ik·b_kj| over the checked entries:
     *                    the error relative to the magnitude the sum could have had
     */
    public record Result(int m, int n, int k, String dtype, double timeMsMedian, double gflops, double maxRelError) {
    }

    private GemmBenchmark() {
    }

    /** C (m×n) = A (m×k) · B (k×n) in {@code dtype}, warmup untimed calls, then iters timed ones. */
    public static Result run(Backend backend, int m, int n, int k, DType dtype, int warmup, int iters, long seed) {
        if (m < 1 || n < 1 || k < 1 || warmup < 0 || iters < 1) {
            throw new IllegalArgumentException("GEMM benchmark needs positive sizes and at least one timed call, got m="
                    + m + " n=" + n + " k=" + k + " warmup=" + warmup + " iters=" + iters);
        }
        SplittableRandom rng = new SplittableRandom(seed);
        try (Tensor a = backend.allocate(dtype, MemoryCategory.WORKSPACE, m, k);   // (m, k)
             Tensor b = backend.allocate(dtype, MemoryCategory.WORKSPACE, k, n);   // (k, n)
             Tensor c = backend.allocate(dtype, MemoryCategory.WORKSPACE, m, n)) { // (m, n)
            backend.copyFromHost(randomUniform(rng, m * k), 0, a);
            backend.copyFromHost(randomUniform(rng, k * n), 0, b);
            for (int i = 0; i < warmup; i++) {
                backend.gemm(false, false, m, n, k, 1f, a, b, 0f, c);
            }
            backend.synchronize();
            double[] timesMs = new double[iters];
            for (int i = 0; i < iters; i++) {
                long start = System.nanoTime();
                backend.gemm(false, false, m, n, k, 1f, a, b, 0f, c);
                backend.synchronize();
                timesMs[i] = (System.nanoTime() - start) / 1e6;
            }
            double medianMs = Stats.median(timesMs);
            double error = maxRelError(backend.toHost(a), backend.toHost(b), backend.toHost(c), m, n, k, rng);
            return new Result(m, n, k, dtype.shortName(), medianMs, Flops.gemm(m, n, k) / (medianMs * 1e6), error);
        }
    }

    /** One result per size s, for s×s×s GEMMs. */
    public static List<Result> runSquare(Backend backend, int[] sizes, DType dtype, int warmup, int iters, long seed) {
        List<Result> results = new ArrayList<>();
        for (int s : sizes) {
            results.add(run(backend, s, s, s, dtype, warmup, iters, seed + s));
        }
        return results;
    }

    private static float[] randomUniform(SplittableRandom rng, int count) {
        float[] x = new float[count];
        for (int i = 0; i < count; i++) {
            x[i] = (float) (2 * rng.nextDouble() - 1);
        }
        return x;
    }

    private static double maxRelError(float[] a, float[] b, float[] c, int m, int n, int k, SplittableRandom rng) {
        double worst = 0;
        for (int s = 0; s < CHECKED_ENTRIES; s++) {
            int i = rng.nextInt(m);
            int j = rng.nextInt(n);
            double ref = 0;
            double magnitude = 0;
            for (int p = 0; p < k; p++) {
                double term = (double) a[i * k + p] * b[p * n + j];
                ref += term;
                magnitude += Math.abs(term);
            }
            worst = Math.max(worst, Math.abs(c[i * n + j] - ref) / magnitude);
        }
        return worst;
    }
}
