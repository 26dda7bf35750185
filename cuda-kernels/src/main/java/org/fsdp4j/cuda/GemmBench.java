// GEMM throughput on one GPU (a program, not a test): square bf16 products by default, timed
// with CUDA events after warm-up, reported against the device's dense peak in the nccl-tests
// style, with a spot check of the result, and written as JSON for machines.
//
//   java -cp ... org.fsdp4j.cuda.GemmBench [--sizes 4096,8192] [--dtypes bf16] [--iters 10] [--json FILE]
package org.fsdp4j.cuda;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Tensor;

public final class GemmBench {

    private static final int WARMUP = 3;
    private static final int SPOT_CHECKS = 16;

    /** One measured product. */
    public record Result(String dtype, int m, int n, int k, double timeUs, double tflops, Double peakTflops,
                         int wrong) {
    }

    private GemmBench() {
    }

    /** Dense (no sparsity) tensor-core peak in TFLOP/s for half/bf16 inputs with fp32 accumulation. */
    static Double peakTflops(String deviceName, DType dtype) {
        if (dtype == DType.F32) {
            return null;   // plain fp32 runs on CUDA cores; no tensor-core peak applies
        }
        String n = deviceName.toUpperCase(Locale.ROOT);
        if (n.contains("H200") || (n.contains("H100") && !n.contains("PCIE"))) {
            return 989.4;
        }
        if (n.contains("H100")) {
            return 756.0;
        }
        if (n.contains("B200")) {
            return 2250.0;
        }
        if (n.contains("A100")) {
            return 312.0;
        }
        if (n.contains("L40S")) {
            return 362.1;
        }
        if (n.contains("L4")) {
            return 121.0;
        }
        if (n.contains("A10")) {
            return 125.0;
        }
        return null;
    }

    public static List<Result> run(CudaBackend be, int[] sizes, DType[] dtypes, int iters, SplittableRandom rnd) {
        List<Result> out = new ArrayList<>();
        String device = be.name();
        for (DType d : dtypes) {
            for (int s : sizes) {
                float[] a = randoms(rnd, (long) s * s);
                float[] b = randoms(rnd, (long) s * s);
                try (Tensor ta = be.allocate(d, MemoryCategory.WORKSPACE, s, s);
                     Tensor tb = be.allocate(d, MemoryCategory.WORKSPACE, s, s);
                     Tensor tc = be.allocate(d, MemoryCategory.WORKSPACE, s, s)) {
                    be.copyFromHost(a, 0, ta);
                    be.copyFromHost(b, 0, tb);
                    for (int i = 0; i < WARMUP; i++) {
                        be.gemm(false, false, s, s, s, 1f, ta, tb, 0f, tc);
                    }
                    CudaEvent start = be.recordTiming();
                    for (int i = 0; i < iters; i++) {
                        be.gemm(false, false, s, s, s, 1f, ta, tb, 0f, tc);
                    }
                    CudaEvent end = be.recordTiming();
                    end.synchronize();
                    double timeUs = 1000.0 * end.elapsedMsSince(start) / iters;
                    double tflops = 2.0 * s * s * s / (timeUs * 1e-6) / 1e12;
                    int wrong = spotCheck(be.toHost(tc), a, b, s, d, rnd);
                    out.add(new Result(d.shortName(), s, s, s, timeUs, tflops, peakTflops(device, d), wrong));
                }
            }
        }
        return out;
    }

    /** Elements of C that differ from an fp64 dot product of the dtype-rounded inputs beyond the dtype's rounding. */
    private static int spotCheck(float[] c, float[] a, float[] b, int s, DType d, SplittableRandom rnd) {
        double rtol = d == DType.F32 ? 1e-4 : d == DType.F16 ? 2e-3 : 1e-2;
        int wrong = 0;
        for (int t = 0; t < SPOT_CHECKS; t++) {
            int i = rnd.nextInt(s);
            int j = rnd.nextInt(s);
            double ref = 0;
            double mag = 0;
            for (int p = 0; p < s; p++) {
                double x = (double) d.round(a[i * s + p]) * d.round(b[p * s + j]);
                ref += x;
                mag += Math.abs(x);
            }
            if (!(Math.abs(c[i * s + j] - ref) <= rtol * Math.abs(ref) + 1e-4 * mag)) {
                wrong++;
            }
        }
        return wrong;
    }

    private static float[] randoms(SplittableRandom rnd, long n) {
        float[] x = new float[Math.toIntExact(n)];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        return x;
    }

    static String table(String device, List<Result> results) {
        StringBuilder sb = new StringBuilder("# GEMM C = A·B on " + device + "\n");
        sb.append(String.format(Locale.ROOT, "# %6s %7s %7s %7s %12s %10s %10s %8s %7s%n", "dtype", "m", "n", "k",
                "time(us)", "TFLOP/s", "peak", "%peak", "#wrong"));
        for (Result r : results) {
            sb.append(String.format(Locale.ROOT, "  %6s %7d %7d %7d %12.1f %10.1f %10s %8s %7d%n", r.dtype(), r.m(),
                    r.n(), r.k(), r.timeUs(), r.tflops(), r.peakTflops() == null ? "n/a" : String.format(Locale.ROOT,
                            "%.0f", r.peakTflops()), r.peakTflops() == null ? "n/a" : String.format(Locale.ROOT,
                            "%.1f", 100 * r.tflops() / r.peakTflops()), r.wrong()));
        }
        return sb.toString();
    }

    public static void main(String[] args) throws IOException {
        int[] sizes = {4096, 8192};
        DType[] dtypes = {DType.BF16};
        int iters = 10;
        String json = null;
        for (int i = 0; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--sizes" -> sizes = java.util.Arrays.stream(need(v, "--sizes").split(","))
                        .mapToInt(x -> Integer.parseInt(x.trim())).toArray();
                case "--dtypes" -> dtypes = java.util.Arrays.stream(need(v, "--dtypes").split(","))
                        .map(DType::parseFloating).toArray(DType[]::new);
                case "--iters" -> iters = Integer.parseInt(need(v, "--iters"));
                case "--json" -> json = need(v, "--json");
                default -> {
                    System.err.println("unknown argument '" + args[i] + "'; use --sizes 4096,8192 --dtypes bf16"
                            + " --iters 10 --json FILE");
                    System.exit(2);
                }
            }
            i++;
        }
        CudaProbe.Result probe = CudaProbe.probe();
        if (!probe.usable()) {
            System.err.println("bench gemm needs a GPU: " + probe.unavailableReason().get());
            System.exit(1);
        }
        List<Result> results;
        String device;
        try (CudaBackend be = new CudaBackend(0, new MemoryTracker("bench"), CudaOptions.fromSystemProperties())) {
            device = be.name();
            results = run(be, sizes, dtypes, iters, new SplittableRandom());
        }
        System.out.print(table(device, results));
        if (json != null) {
            Map<String, Object> doc = new LinkedHashMap<>();
            doc.put("benchmark", "gemm");
            doc.put("device", device);
            doc.put("results", results);
            new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(new File(json), doc);
        }
        boolean anyWrong = results.stream().anyMatch(r -> r.wrong() > 0);
        System.exit(anyWrong ? 1 : 0);
    }

    private static String need(String value, String flag) {
        if (value == null) {
            throw new IllegalArgumentException(flag + " needs a value");
        }
        return value;
    }
}
