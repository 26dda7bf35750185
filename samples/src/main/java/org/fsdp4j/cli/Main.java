// The fsdp4j command line: `train`, `plan`, `checkpoint`, `data`, `bench` and `launch`.
// Only main() exits the JVM; everything else returns an exit code so tests run it in-process
// (SignalStop's halt after an abandoned step, and the halt of a process still stuck after its
// group was aborted, StuckAfterAbort, are the exceptions). ExitCode lists the codes.
package org.fsdp4j.cli;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import org.fsdp4j.comm.StuckAfterAbort;
import picocli.CommandLine.Command;
import picocli.CommandLine.ExecutionException;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.Spec;
import picocli.CommandLine.TypeConversionException;
import picocli.CommandLine;

@Command(name = "fsdp4j", mixinStandardHelpOptions = true, version = Main.VERSION,
        description = "Fully Sharded Data Parallel (ZeRO-3) training on the JVM.",
        subcommands = {TrainCommand.class, PlanCommand.class, CheckpointCommand.class, GenerateCommand.class,
            DataCommand.class, BenchCommand.class,
            LaunchCommand.class, CommandLine.HelpCommand.class})
public final class Main implements Runnable {

    static final String VERSION = "fsdp4j 0.1.0";

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing command: use train, plan, checkpoint, generate, data, bench or launch");
    }

    /** The command line with fsdp4j's error handling; set its out/err to capture output. */
    public static CommandLine commandLine() {
        ErrorHandler handler = new ErrorHandler();
        CommandLine cl = new CommandLine(new Main())
                .registerConverter(Path.class, Main::path)
                .setExecutionExceptionHandler(handler)
                .setParameterExceptionHandler(handler)
                .setExecutionStrategy(Main::execute);
        setVersion(cl);
        cl.getSubcommands().get("launch").setStopAtPositional(true);   // what follows the command is its own
        return cl;
    }

    /** -V answers on every subcommand, not only the top one. */
    private static void setVersion(CommandLine cl) {
        cl.getCommandSpec().version(VERSION);
        cl.getSubcommands().values().forEach(Main::setVersion);
    }

    /**
     * Runs the command; an OutOfMemoryError (an Error, which picocli lets through) goes to the
     * ErrorHandler like any failure, as "out of memory" with its exit code.
     */
    private static int execute(ParseResult parseResult) {
        try {
            return new CommandLine.RunLast().execute(parseResult);
        } catch (OutOfMemoryError e) {
            ParseResult last = parseResult;
            while (last.hasSubcommand()) {
                last = last.subcommand();
            }
            throw new ExecutionException(last.commandSpec().commandLine(), "out of memory", e);
        }
    }

    /** A path argument; one the JVM cannot represent names the locale as the reason. */
    private static Path path(String value) {
        try {
            return Path.of(value);
        } catch (InvalidPathException e) {
            throw new TypeConversionException("'" + value + "' is not a path this JVM can open under its file-name"
                    + " encoding " + System.getProperty("sun.jnu.encoding") + " (" + e.getReason()
                    + "): run with a UTF-8 locale, e.g. LC_ALL=C.UTF-8 (./fsdp4j picks one itself)");
        }
    }

    public static void main(String[] args) {
        // a process whose group was aborted but whose threads stay stuck (a CUDA call behind a NCCL
        // kernel the abort did not end) still ends, with its one line, so the job can end
        StuckAfterAbort.handler(why -> {
            System.err.println("error: " + why.getMessage().strip().replaceAll("\\s*\\n\\s*", "; ")
                    + " (this process did not end by itself within " + StuckAfterAbort.GRACE.toSeconds() + " s of the abort)");
            System.err.flush();
            Runtime.getRuntime().halt(ExitCode.RANK_FAILED.code());
        });
        System.exit(commandLine().execute(args));
    }
}
