// `fsdp4j bench`: benchmark programs (not tests). `gemm` prints an nccl-tests-like table of the
// backend's GEMM; `step` times training steps. Both write JSON with --out.
package org.fsdp4j.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "bench", mixinStandardHelpOptions = true, description = "Benchmarks: GEMM, training step, cost of sharding.",
        subcommands = {GemmBenchCommand.class, StepBenchCommand.class, ShardingBenchCommand.class})
final class BenchCommand implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing benchmark: use bench gemm, bench step or bench sharding");
    }
}
