// What a run saves and where it starts from: --save-every K --save-dir DIR --keep K --resume
// DIR|latest. A run with a save directory also saves when SIGTERM stops it (preemption), so
// --resume latest picks up where it stopped.
package org.fsdp4j.train;

import java.nio.file.Path;
import java.util.Optional;

/**
 * @param saveEvery save a checkpoint every K optimizer steps; 0 saves only when stopped by SIGTERM
 * @param saveDir   where checkpoints go (step-NNNNNNNN directories); empty: no checkpoints
 * @param keep      complete checkpoints kept (the oldest are removed after a save)
 * @param resume    "latest" (the newest under saveDir) or a checkpoint directory; empty: start fresh
 */
public record CheckpointOptions(int saveEvery, Optional<Path> saveDir, int keep, Optional<String> resume) {

    public static final int DEFAULT_KEEP = 3;

    public CheckpointOptions {
        if (saveDir == null || resume == null) {
            throw new IllegalArgumentException("saveDir and resume must be given (Optional.empty() for none)");
        }
        if (saveEvery < 0) {
            throw new IllegalArgumentException("--save-every must be >= 0 (0: only when stopped by SIGTERM), got " + saveEvery);
        }
        if (saveEvery > 0 && saveDir.isEmpty()) {
            throw new IllegalArgumentException("--save-every needs --save-dir DIR (where the checkpoints go)");
        }
        if (keep < 1) {
            throw new IllegalArgumentException("--keep must be at least 1, got " + keep);
        }
        if (resume.isPresent() && resume.get().equals("latest") && saveDir.isEmpty()) {
            throw new IllegalArgumentException("--resume latest needs --save-dir DIR (where to look for the latest checkpoint)");
        }
        if (resume.isPresent() && resume.get().isBlank()) {
            throw new IllegalArgumentException("--resume is empty: give a checkpoint directory or 'latest'");
        }
    }

    /** No checkpoints: neither saved nor loaded. */
    public static CheckpointOptions none() {
        return new CheckpointOptions(0, Optional.empty(), DEFAULT_KEEP, Optional.empty());
    }

    /** Whether the run saves (every K steps, and when SIGTERM stops it). */
    public boolean saves() {
        return saveDir.isPresent();
    }
}
