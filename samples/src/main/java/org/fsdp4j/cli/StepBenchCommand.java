// `fsdp4j bench step`: times training steps of the 4-layer 256-wide benchmark model by default
// (any train flag applies), and reports tokens/s and achieved GFLOP/s. The default warm-up is
// long enough for the JIT: the CPU step keeps getting faster until C2 has compiled its loops
// (about 15 steps), and a training run spends nearly all its steps in that steady state, which
// is what the median should report (PyTorch's eager step, the usual comparison, has no JIT).
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.util.concurrent.Callable;
import org.fsdp4j.train.StepBenchmark;
import org.fsdp4j.train.TrainConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "step", mixinStandardHelpOptions = true,
        description = "Time training steps (warm-up, then the median); tokens/s, GFLOP/s and MFU where the device peak is known.")
final class StepBenchCommand implements Callable<Integer> {

    static final String DEFAULT_PRESET = "bench-4x256";
    static final int DEFAULT_BATCH_SIZE = 8;
    static final int DEFAULT_SEQ_LEN = 128;
    static final int DEFAULT_TIMED_STEPS = 10;
    static final String DEFAULT_WARMUP_STEPS = "15";

    @Spec
    CommandSpec spec;

    @Mixin
    TrainOptions options;

    @Option(names = "--warmup", defaultValue = DEFAULT_WARMUP_STEPS, description = "untimed steps first (default: ${DEFAULT-VALUE})")
    int warmup;

    @Override
    public Integer call() {
        DistOptions.requireAlone("bench step", System.getenv());
        PrintWriter out = spec.commandLine().getOut();
        TrainConfig.Builder defaults = TrainConfig.builder().preset(DEFAULT_PRESET).batchSize(DEFAULT_BATCH_SIZE)
                .seqLen(DEFAULT_SEQ_LEN).steps(DEFAULT_TIMED_STEPS);
        TrainConfig config = options.applyTo(defaults).build();
        try (OutputDir dir = OutputDir.claim(config.outDir(), "bench step", REPORT_FILE)) {
            dir.removeEarlierReports();
            report(out, config, dir);
        }
        return 0;
    }

    static final String REPORT_FILE = "step.json";

    private void report(PrintWriter out, TrainConfig config, OutputDir dir) {
        StepBenchmark.Result r = StepBenchmark.run(config, warmup, config.steps(), out::println,
                info -> RunLog.header(out, "bench step", info),
                step -> RunLog.step(out, step, config.fsdp().precision().needsLossScaling()));
        out.println(Format.f("# %8s %10s %12s %12s %10s %10s %8s %11s", "batch", "seq", "time(ms)", "tok/s",
                "GFLOP/step", "GFLOP/s", "MFU", "syncs/step"));
        out.println(Format.f("  %8d %10d %12.2f %12.0f %10.3f %10.2f %8s %11d", r.batchSize(), r.seqLen(),
                r.stepTimeMsMedian(), r.tokensPerSecond(), r.gflopPerStep(), r.achievedGflops(),
                r.mfu() == null ? "n/a" : Format.f("%.1f%%", 100 * r.mfu()), r.hostSyncsPerStep()));
        if (r.mfu() == null) {
            out.println("# MFU n/a: the backend does not know this device's peak");
        }
        dir.write(REPORT_FILE, r).ifPresent(file -> out.println("results: " + file));
    }
}
