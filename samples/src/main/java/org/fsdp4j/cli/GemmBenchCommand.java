// `fsdp4j bench gemm`: the backend's GEMM at several sizes, one table row each: TFLOP/s, the
// share of the device's peak where the backend knows it, and the sampled fp64 check (#wrong).
// Exits 1 when an entry is off by more than the dtype's worst-case error, so scripts can rely on it.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.concurrent.Callable;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.bench.GemmBenchmark;
import org.fsdp4j.metrics.JsonFiles;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryTracker;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "gemm", mixinStandardHelpOptions = true,
        description = "Time C = A·B for square sizes (TFLOP/s, % of the device's peak); check sampled entries against fp64.")
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

    @Option(names = "--iters", defaultValue = "10", description = "timed calls per size, median reported (default: ${DEFAULT-VALUE})")
    int iters;

    @Option(names = "--cpu-threads", defaultValue = "0", description = "CPU backend threads, 0 = all cores (default: ${DEFAULT-VALUE})")
    int cpuThreads;

    @Option(names = "--seed", defaultValue = "1", description = "seed of the random matrices (default: ${DEFAULT-VALUE})")
    long seed;

    @Option(names = "--out", paramLabel = "DIR", description = "write DIR/gemm.json")
    Path outDir;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        DType type = DType.parseFloating(dtype);
        for (int s : sizes) {
            if (s < 1) {
                throw new IllegalArgumentException("--sizes must be positive, got " + s);
            }
        }
        if (cpuThreads < 0) {
            throw new IllegalArgumentException("--cpu-threads must be >= 0 (0 = all cores), got " + cpuThreads);
        }
        Device d = Backends.resolve(device, out::println);
        List<GemmBenchmark.Result> results = new ArrayList<>();
        try (Backend backend = Backends.create(d, new MemoryTracker("bench " + d), cpuThreads)) {
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
            if (outDir != null) {
                Path file = outDir.resolve("gemm.json");
                JsonFiles.writeAtomically(file, Map.of("device", d.toString(), "backend", backend.name(),
                        "results", results));
                out.println("results: " + file);
            }
        }
        int wrong = results.stream().mapToInt(GemmBenchmark.Result::wrong).sum();
        if (wrong > 0) {
            spec.commandLine().getErr().println("bench gemm: " + wrong + " checked entries are off by more than the"
                    + " worst case for a correct " + type.shortName() + " GEMM (see #wrong): the backend's GEMM is wrong");
            return 1;
        }
        return 0;
    }
}
