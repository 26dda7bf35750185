// The one error path of the command line: every failure ends as one line on stderr and an
// exit code from ExitCode. A flag picocli cannot parse exits 2; a UserError carries its own
// code; a rejected value (IllegalArgumentException) is bad input; running out of memory, a
// failed report write and a failed rank are classified wherever they are in the cause chain
// (ranks wrap what they throw). Anything else is a bug and keeps its stack trace.
package org.fsdp4j.cli;

import java.io.UncheckedIOException;
import org.fsdp4j.api.LossScaleFloorException;
import org.fsdp4j.backend.BackendUnavailableException;
import org.fsdp4j.checkpoint.CheckpointException;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.LocalLauncher;
import org.fsdp4j.cuda.CudaException;
import org.fsdp4j.dist.ConfigMismatchException;
import org.fsdp4j.dist.RendezvousException;
import picocli.CommandLine.IExecutionExceptionHandler;
import picocli.CommandLine.IParameterExceptionHandler;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine;

final class ErrorHandler implements IExecutionExceptionHandler, IParameterExceptionHandler {

    /** How a run that ran out of memory can be made to fit, for the message. */
    static final String MEMORY_HINT = "lower --batch-size, raise --micro-batches or use --checkpoint-activations"
            + " (the preflight line says what a run needs)";

    @Override
    public int handleParseException(ParameterException ex, String[] args) {
        CommandLine cmd = ex.getCommandLine();
        cmd.getErr().println("error: " + ex.getMessage() + " (see " + cmd.getCommandSpec().qualifiedName() + " --help)");
        cmd.getErr().flush();
        return cmd.getCommandSpec().exitCodeOnInvalidInput();
    }

    @Override
    public int handleExecutionException(Exception ex, CommandLine cmd, ParseResult parseResult) {
        UserError e = classify(ex);
        if (e == null) {
            cmd.getErr().println("error: internal failure, please report it with the trace below: " + ex);
            ex.printStackTrace(cmd.getErr());
            cmd.getErr().flush();
            return ExitCode.INTERNAL.code();
        }
        cmd.getErr().println("error: " + oneLine(e.getMessage()));
        cmd.getErr().flush();
        return e.exitCode().code();
    }

    /** The user-facing failure {@code ex} stands for, or null for a bug. */
    static UserError classify(Throwable ex) {
        if (ex instanceof UserError u) {
            return u;
        }
        for (Throwable t = ex; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof CheckpointException c) {       // also when a rank's load met it
                return new UserError(ExitCode.BAD_CHECKPOINT, c.getMessage(), ex);
            }
        }
        if (ex instanceof IllegalArgumentException && ex.getMessage() != null) {   // without a message: not ours, a bug
            return new UserError(ExitCode.BAD_INPUT, ex.getMessage(), ex);
        }
        for (Throwable t = ex; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof OutOfMemoryError oom) {
                String hint = String.valueOf(oom.getMessage()).contains("Java heap space")
                        ? "give the JVM more heap (FSDP4J_JAVA_OPTS=-Xmx...) or " + MEMORY_HINT : MEMORY_HINT;
                return new UserError(ExitCode.OUT_OF_MEMORY, "out of memory: " + oom.getMessage() + "; " + hint, ex);
            }
            if (t instanceof CudaException c && "cudaErrorMemoryAllocation".equals(c.errorName())) {
                return new UserError(ExitCode.OUT_OF_MEMORY, "out of GPU memory: " + c.getMessage(), ex);
            }
            if (t instanceof BackendUnavailableException b) {
                return new UserError(ExitCode.BAD_INPUT, b.getMessage(), ex);
            }
            if (t instanceof LossScaleFloorException) {
                return new UserError(ExitCode.DIVERGED, "training diverged: " + t.getMessage(), ex);
            }
        }
        if (ex instanceof UncheckedIOException) {
            return new UserError(ExitCode.IO_ERROR, ex.getMessage(), ex);
        }
        if (ex instanceof LocalLauncher.RanksFailedException r && r.getCause() instanceof CommException) {
            return new UserError(ExitCode.RANK_FAILED, r.getMessage(), ex);
        }
        for (Throwable t = ex; t != null; t = t.getCause() == t ? null : t.getCause()) {     // runs over several processes
            if (t instanceof ConfigMismatchException) {
                return new UserError(ExitCode.SETTINGS_DIFFER, t.getMessage(), ex);
            }
            if (t instanceof RendezvousException || t instanceof CommException) {
                return new UserError(t instanceof CommException ? ExitCode.RANK_FAILED : ExitCode.RENDEZVOUS_FAILED,
                        t.getMessage(), ex);
            }
        }
        return null;
    }

    /** A message as one line (what each rank saw, joined with "; "). */
    private static String oneLine(String message) {
        return String.valueOf(message).strip().replaceAll("\\s*\\n\\s*", "; ");
    }
}
