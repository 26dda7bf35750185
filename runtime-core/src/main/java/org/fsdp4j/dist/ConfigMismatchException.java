// The processes of a run were started with different settings: every process fails at start with
// the same message, which lists each key that differs and the value each process has.
package org.fsdp4j.dist;

public final class ConfigMismatchException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public ConfigMismatchException(String message) {
        super(message);
    }
}
