// A checkpoint that cannot be used: incomplete, truncated, corrupted, of another model, or not a
// checkpoint at all. The message is one line that names the file and the problem; the command
// line turns it into exit code 9 (bad checkpoint).
package org.fsdp4j.checkpoint;

import java.nio.file.Path;

public final class CheckpointException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final transient Path file;

    public CheckpointException(Path file, String problem) {
        super(file + ": " + problem);
        this.file = file;
    }

    public CheckpointException(Path file, String problem, Throwable cause) {
        super(file + ": " + problem, cause);
        this.file = file;
    }

    /** The file (or directory) at fault. */
    public Path file() {
        return file;
    }
}
