// The fsdp4j command line: `train` and `bench` (more commands join as the runtime grows).
// Only main() exits the JVM; everything else returns an exit code so tests run it in-process.
package org.fsdp4j.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "fsdp4j", mixinStandardHelpOptions = true, version = "fsdp4j 0.1.0",
        description = "Fully Sharded Data Parallel (ZeRO-3) training on the JVM.",
        subcommands = {TrainCommand.class, BenchCommand.class, CommandLine.HelpCommand.class})
public final class Main implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing command: use train or bench");
    }

    /** The command line with fsdp4j's error handling; set its out/err to capture output. */
    public static CommandLine commandLine() {
        ErrorHandler handler = new ErrorHandler();
        return new CommandLine(new Main())
                .setExecutionExceptionHandler(handler)
                .setParameterExceptionHandler(handler);
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }
}
