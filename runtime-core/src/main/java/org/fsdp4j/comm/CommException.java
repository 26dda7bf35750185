// The one failure type of a collective: its message names the operation, the group, the rank
// that saw it and, where known, the rank that caused it (failed, aborted, or never arrived).
package org.fsdp4j.comm;

public final class CommException extends RuntimeException {

    public CommException(String message) {
        super(message);
    }

    public CommException(String message, Throwable cause) {
        super(message, cause);
    }
}
