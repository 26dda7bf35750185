// `fsdp4j bench`: benchmark programs (not tests). `gemm` prints an nccl-tests-like table of the
// backend's GEMM; `step` times training steps; `sharding` the step at several world sizes;
// `collectives` the communicator's collectives (nccl-tests' table). All write JSON with --out.
package org.fsdp4j.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "bench", mixinStandardHelpOptions = true, description = "Benchmarks: GEMM, training step, cost of sharding, collectives.",
        subcommands = {GemmBenchCommand.class, StepBenchCommand.class, ShardingBenchCommand.class,
                CollectivesBenchCommand.class})
final class BenchCommand implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing benchmark: use bench gemm, bench step, bench sharding or bench collectives");
    }
}
