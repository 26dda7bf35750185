// `fsdp4j bench sharding`: step time of the same global batch at N = 1, 2, 4 in-process FSDP
// ranks (any train flag applies: --strategy, --param-dtype, ...), one table row per N.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;
import org.fsdp4j.train.ShardingBenchmark;
import org.fsdp4j.train.TrainConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "sharding", mixinStandardHelpOptions = true,
        description = "Step time at several world sizes on the same global batch (the cost of sharding on this machine).")
final class ShardingBenchCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Mixin
    TrainOptions options;

    @Option(names = "--world-sizes", split = ",", paramLabel = "N", defaultValue = "1,2,4",
            description = "world sizes to time; the first is the baseline (default: ${DEFAULT-VALUE})")
    int[] worldSizes;

    @Option(names = "--warmup", defaultValue = StepBenchCommand.DEFAULT_WARMUP_STEPS, description = "untimed steps per world size (default: ${DEFAULT-VALUE})")
    int warmup;

    @Override
    public Integer call() {
        DistOptions.requireAlone("bench sharding", System.getenv());
        PrintWriter out = spec.commandLine().getOut();
        TrainConfig.Builder defaults = TrainConfig.builder().preset(StepBenchCommand.DEFAULT_PRESET)
                .batchSize(StepBenchCommand.DEFAULT_BATCH_SIZE).seqLen(StepBenchCommand.DEFAULT_SEQ_LEN)
                .steps(StepBenchCommand.DEFAULT_TIMED_STEPS);
        if (options.worldSize != null) {
            throw new IllegalArgumentException("bench sharding times every world size in --world-sizes (default 1,2,4);"
                    + " --world-size does not apply: use --world-sizes " + options.worldSize);
        }
        TrainConfig config = options.applyTo(defaults).build();
        try (OutputDir dir = OutputDir.claim(config.outDir(), "bench sharding", REPORT_FILE)) {
            dir.removeEarlierReports();
            report(out, config, dir);
        }
        return 0;
    }

    static final String REPORT_FILE = "sharding.json";

    private void report(PrintWriter out, TrainConfig config, OutputDir dir) {
        List<ShardingBenchmark.Row> rows = ShardingBenchmark.run(config, worldSizes, warmup, config.steps(), out::println,
                info -> RunLog.header(out, "bench sharding", info),
                step -> RunLog.step(out, step, config.fsdp().precision().needsLossScaling()));
        out.println(Format.f("# %5s %12s %8s %12s %14s %14s", "ranks", "time(ms)", "vs N=" + worldSizes[0], "tok/s",
                "comm/rank/step", "peak/rank"));
        for (ShardingBenchmark.Row r : rows) {
            out.println(Format.f("  %5d %12.2f %7.2fx %12.0f %14s %14s", r.worldSize(), r.stepTimeMsMedian(),
                    r.ratioToOneRank(), r.tokensPerSecond(), Format.bytes(r.commBytesPerRank()),
                    Format.bytes(r.peakBytesPerRank())));
        }
        out.println(Format.f("  (%d cores; each of N ranks computes with max(1, cores/N) threads)",
                Runtime.getRuntime().availableProcessors()));
        dir.write(REPORT_FILE, rows).ifPresent(file -> out.println("results: " + file));
    }
}
