// Times the backend's GEMM on square and rectangular sizes, nccl-tests style: warm-up calls,
// then timed calls issued back to back (the mean, so a GPU's queue stays full and launch
// latency is not counted per call), then a correctness check of sampled entries against an
// fp64 dot product of the same (dtype-rounded) inputs. Written against Backend only, so one
// program measures the CPU backend and, with --device cuda, the GPU against its peak.
package org.fsdp4j.metrics;

import java.util.OptionalDouble;
import java.util.SplittableRandom;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

public final class GemmBenchmark {

    /** Entries of C checked against the fp64 reference per size. */
    private static final int CHECKED_ENTRIES = 64;

    /**
     * One row of the table.
     *
     * @param peakTflops    the device's peak for this dtype (Backend.peakTflops), null where unknown
     * @param percentOfPeak 100·tflops/peakTflops, null where the peak is unknown
     * @param maxRelError   the largest |c − ref| / Σ_k |a_ik·b_kj| over the checked entries: the
     *                      error relative to the magnitude the sum could have had
     * @param errorBound    the worst case maxRelError may reach (see errorBound)
     * @param wrong         checked entries whose error exceeds errorBound (nccl-tests' #wrong)
     */
    public record Result(int m, int n, int k, String dtype, double timeUs, double tflops, Double peakTflops,
                         Double percentOfPeak, double maxRelError, double errorBound, int wrong) {
    }

    private GemmBenchmark() {
    }

    /** C (m×n) = A (m×k) · B (k×n) in {@code dtype}: warmup untimed calls, then iters timed ones. */
    public static Result run(Backend backend, int m, int n, int k, DType dtype, int warmup, int iters, long seed) {
        if (m < 1 || n < 1 || k < 1 || warmup < 0 || iters < 1) {
            throw new IllegalArgumentException("GEMM benchmark needs positive sizes and at least one timed call, got m="
                    + m + " n=" + n + " k=" + k + " warmup=" + warmup + " iters=" + iters);
        }
        SplittableRandom rng = new SplittableRandom(seed);
        float[] hostA = randomUniform(rng, Math.multiplyExact(m, k));   // (m, k)
        float[] hostB = randomUniform(rng, Math.multiplyExact(k, n));   // (k, n)
        try (Tensor a = backend.allocate(dtype, MemoryCategory.WORKSPACE, m, k);   // (m, k)
             Tensor b = backend.allocate(dtype, MemoryCategory.WORKSPACE, k, n);   // (k, n)
             Tensor c = backend.allocate(dtype, MemoryCategory.WORKSPACE, m, n)) { // (m, n)
            backend.copyFromHost(hostA, 0, a);
            backend.copyFromHost(hostB, 0, b);
            for (int i = 0; i < warmup; i++) {
                backend.gemm(false, false, m, n, k, 1f, a, b, 0f, c);
            }
            backend.synchronize();
            long start = System.nanoTime();
            for (int i = 0; i < iters; i++) {
                backend.gemm(false, false, m, n, k, 1f, a, b, 0f, c);
            }
            backend.synchronize();
            double timeUs = (System.nanoTime() - start) / 1e3 / iters;
            double tflops = Flops.gemm(m, n, k) / (timeUs * 1e6);
            double bound = errorBound(dtype, k);
            double[] errors = relErrors(dtype, hostA, hostB, backend.toHost(c), m, n, k, rng);
            double maxError = 0;
            int wrong = 0;
            for (double e : errors) {
                maxError = Math.max(maxError, e);
                wrong += e <= bound ? 0 : 1;
            }
            OptionalDouble peak = backend.peakTflops(dtype);
            return new Result(m, n, k, dtype.shortName(), timeUs, tflops, peak.isPresent() ? peak.getAsDouble() : null,
                    peak.isPresent() ? 100 * tflops / peak.getAsDouble() : null, maxError, bound, wrong);
        }
    }

    /**
     * Worst case of |c − ref| / Σ|a·b| for a correct GEMM: products of fp32, fp16 or bf16 inputs
     * are exact in fp32 (up to 24 significant bits), the fp32 sum of k of them is off by at most
     * k·2^-24·Σ|a·b|, and rounding C to its dtype adds its unit roundoff (2^-8 bf16: 8 significant bits; 2^-11 fp16);
     * fp32 inputs may be rounded to TF32 (10 stored bits) where the backend allows it, 2·2^-11 more.
     */
    static double errorBound(DType dtype, int k) {
        double accumulation = k * 0x1p-24;
        return switch (dtype) {
            case BF16 -> accumulation + 0x1p-8;
            case F16 -> accumulation + 0x1p-11;
            default -> accumulation + 0x1p-24 + 2 * 0x1p-11;
        };
    }

    private static float[] randomUniform(SplittableRandom rng, int count) {
        float[] x = new float[count];
        for (int i = 0; i < count; i++) {
            x[i] = (float) (2 * rng.nextDouble() - 1);
        }
        return x;
    }

    /** |c − ref| / Σ|a·b| at CHECKED_ENTRIES random entries, ref from the inputs rounded as the device stored them. */
    private static double[] relErrors(DType dtype, float[] a, float[] b, float[] c, int m, int n, int k,
                                      SplittableRandom rng) {
        double[] errors = new double[CHECKED_ENTRIES];
        for (int s = 0; s < CHECKED_ENTRIES; s++) {
            int i = rng.nextInt(m);
            int j = rng.nextInt(n);
            double ref = 0;
            double magnitude = 0;
            for (int p = 0; p < k; p++) {
                double term = (double) dtype.round(a[i * k + p]) * dtype.round(b[p * n + j]);
                ref += term;
                magnitude += Math.abs(term);
            }
            errors[s] = Math.abs(c[i * n + j] - ref) / magnitude;
        }
        return errors;
    }
}
