// `fsdp4j bench gemm`: the backend's GEMM at several sizes, one table row each: TFLOP/s, the
// share of the device's peak where the backend knows it, and the sampled fp64 check (#wrong).
// Exits 8 (ExitCode.WRONG_RESULTS) when an entry is off by more than the dtype's worst-case
// error, so scripts can rely on it. Sizes, warm-up, iterations and --out are checked first.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.Callable;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.backend.cpu.CpuBackendProvider;
import org.fsdp4j.metrics.GemmBenchmark;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "gemm", mixinStandardHelpOptions = true,
        description = "Time C = A·B for square sizes (TFLOP/s, %% of the device's peak); check sampled entries against fp64.")
final class GemmBenchCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--device", paramLabel = "auto|cpu|cuda[:i]", defaultValue = "auto",
            description = "device to benchmark (default: ${DEFAULT-VALUE})")
    String device;

    @Option(names = "--sizes", split = ",", paramLabel = "N", defaultValue = "256,512,1024,2048",
            description = "square sizes m = n = k (default: ${DEFAULT-VALUE})")
    List<Integer> sizes;

    @Option(names = "--dtype", defaultValue = "fp32", description = "fp32, bf16 or fp16 (default: ${DEFAULT-VALUE})")
    String dtype;

    @Option(names = "--warmup", defaultValue = "3", description = "untimed calls per size (default: ${DEFAULT-VALUE})")
    int warmup;

    @Option(names = "--iters", defaultValue = "10",
            description = "timed back-to-back calls per size, their mean reported (default: ${DEFAULT-VALUE})")
    int iters;

    @Option(names = "--cpu-threads", defaultValue = "0", description = "CPU backend threads, 0 = all cores (default: ${DEFAULT-VALUE})")
    int cpuThreads;

    @Option(names = "--seed", defaultValue = "1", description = "seed of the random matrices (default: ${DEFAULT-VALUE})")
    long seed;

    static final String REPORT_FILE = "gemm.json";

    @Option(names = "--out", paramLabel = "DIR", description = "write DIR/gemm.json (checked and locked before the first GEMM)")
    Path outDir;

    /**
     * The largest size: an N×N fp32 matrix must fit one Java array and one CPU buffer (2^31 − 1
     * bytes), and the benchmark keeps two of them on the heap for its fp64 check.
     */
    static final int MAX_SIZE = (int) Math.sqrt(Integer.MAX_VALUE / 4.0);

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        DType type = DType.parseFloating(dtype);
        long heapBytes = 0;
        for (int s : sizes) {
            if (s < 1 || s > MAX_SIZE) {
                throw new IllegalArgumentException("--sizes must be between 1 and " + MAX_SIZE + ", got " + s);
            }
            heapBytes = Math.max(heapBytes, 2L * 4 * s * s);
        }
        if (heapBytes > Runtime.getRuntime().maxMemory()) {
            throw new UserError(ExitCode.OUT_OF_MEMORY, "--sizes " + sizes.stream().mapToInt(Integer::intValue).max()
                    .orElseThrow() + " needs " + Format.bytes(heapBytes) + " of Java heap for the inputs the check reads,"
                    + " the JVM may use " + Format.bytes(Runtime.getRuntime().maxMemory())
                    + ": use smaller --sizes or give it more heap (FSDP4J_JAVA_OPTS=-Xmx...)");
        }
        if (warmup < 0) {
            throw new IllegalArgumentException("--warmup must be >= 0, got " + warmup);
        }
        if (iters < 1) {
            throw new IllegalArgumentException("--iters must be at least 1, got " + iters);
        }
        if (cpuThreads < 0 || cpuThreads > CpuBackendProvider.MAX_THREADS) {
            throw new IllegalArgumentException("--cpu-threads must be between 0 (all cores) and "
                    + CpuBackendProvider.MAX_THREADS + ", got " + cpuThreads);
        }
        List<GemmBenchmark.Result> results = new ArrayList<>();
        try (OutputDir dir = OutputDir.claim(Optional.ofNullable(outDir), "bench gemm", REPORT_FILE);
             Backend backend = Backends.create(Backends.resolve(device, out::println), new MemoryTracker("bench"),
                     cpuThreads)) {
            Device d = backend.device();
            dir.removeEarlierReports();
            OptionalDouble peak = backend.peakTflops(type);
            out.println("# fsdp4j bench gemm | " + d + ": " + backend.name() + " | C = A·B, row-major, " + type.shortName()
                    + ", mean of " + iters + " back-to-back calls after " + warmup + " warm-up");
            out.println(peak.isPresent() ? Format.f("# peak %.1f TFLOP/s (dense %s)", peak.getAsDouble(), type.shortName())
                    : "# peak unknown for this device and dtype: %peak not reported");
            out.println(Format.f("# %7s %7s %7s %6s %12s %10s %7s %12s %7s", "m", "n", "k", "dtype", "time(us)",
                    "TFLOP/s", "%peak", "max_rel_err", "#wrong"));
            for (int s : sizes) {
                GemmBenchmark.Result r = GemmBenchmark.run(backend, s, s, s, type, warmup, iters, seed + s);
                out.println(Format.f("  %7d %7d %7d %6s %12.1f %10.3f %7s %12.1e %7d", r.m(), r.n(), r.k(), r.dtype(),
                        r.timeUs(), r.tflops(), r.percentOfPeak() == null ? "n/a" : Format.f("%.1f", r.percentOfPeak()),
                        r.maxRelError(), r.wrong()));
                out.flush();
                results.add(r);
            }
            dir.write(REPORT_FILE, Map.of("device", d.toString(), "backend", backend.name(), "results", results))
                    .ifPresent(file -> out.println("results: " + file));
        }
        int wrong = results.stream().mapToInt(GemmBenchmark.Result::wrong).sum();
        if (wrong > 0) {
            throw new UserError(ExitCode.WRONG_RESULTS, "bench gemm: " + wrong + " checked entries are off by more than"
                    + " the worst case for a correct " + type.shortName() + " GEMM (see #wrong): the backend's GEMM is wrong");
        }
        return 0;
    }
}
