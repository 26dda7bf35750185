// The processes of a run could not form their group, or lost the store that holds it together:
// the master address is unreachable or its port taken, a process did not join in time, two
// processes claim one rank, a store call timed out. The message says which and what to check;
// the command line exits with its own code (see docs/training.md, "Exit codes").
package org.fsdp4j.dist;

public class RendezvousException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public RendezvousException(String message) {
        super(message);
    }

    public RendezvousException(String message, Throwable cause) {
        super(message, cause);
    }
}
