// A backend cannot start in this JVM or on this machine for a reason the user fixes (a JVM
// option, a driver), not a bug: the message says why and what to do, and the command line
// prints it as one line.
package org.fsdp4j.backend;

public final class BackendUnavailableException extends IllegalStateException {

    private static final long serialVersionUID = 1L;

    public BackendUnavailableException(String message) {
        super(message);
    }
}
