// Turns bad input into one line on stderr and a non-zero exit: a flag picocli cannot parse
// (exit 2) or a value the configuration rejects (exit 1). Anything else is a bug and keeps its
// stack trace.
package org.fsdp4j.cli;

import java.io.UncheckedIOException;
import picocli.CommandLine;
import picocli.CommandLine.IExecutionExceptionHandler;
import picocli.CommandLine.IParameterExceptionHandler;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;

final class ErrorHandler implements IExecutionExceptionHandler, IParameterExceptionHandler {

    static final int BAD_INPUT = 1;
    static final int BUG = 70;   // EX_SOFTWARE

    @Override
    public int handleParseException(ParameterException ex, String[] args) {
        CommandLine cmd = ex.getCommandLine();
        cmd.getErr().println("error: " + ex.getMessage() + " (see " + cmd.getCommandSpec().qualifiedName() + " --help)");
        cmd.getErr().flush();
        return cmd.getCommandSpec().exitCodeOnInvalidInput();
    }

    @Override
    public int handleExecutionException(Exception ex, CommandLine cmd, ParseResult parseResult) {
        if (ex instanceof IllegalArgumentException || ex instanceof UncheckedIOException) {
            cmd.getErr().println("error: " + ex.getMessage());
            cmd.getErr().flush();
            return BAD_INPUT;
        }
        cmd.getErr().println("error: internal failure, please report it with the trace below: " + ex);
        ex.printStackTrace(cmd.getErr());
        cmd.getErr().flush();
        return BUG;
    }
}
