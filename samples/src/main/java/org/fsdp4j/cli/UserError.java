// A failure the user can act on (bad input, divergence, not enough memory, a busy output
// directory): ErrorHandler prints its message as one line and exits with its code.
package org.fsdp4j.cli;

final class UserError extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final ExitCode exitCode;

    UserError(ExitCode exitCode, String message) {
        super(message);
        this.exitCode = exitCode;
    }

    UserError(ExitCode exitCode, String message, Throwable cause) {
        super(message, cause);
        this.exitCode = exitCode;
    }

    ExitCode exitCode() {
        return exitCode;
    }
}
