// The --out directory of a run, and its --save-dir, claimed before the first step so that a bad
// path costs nothing: created if missing, locked against a second run (a lock file, held with an
// OS lock that dies with the process, so a crashed run leaves no stale lock), and probed by
// writing and removing a file. When the run starts, the reports an earlier run left in --out are
// removed, so a report in the directory is always this run's (or none, if it ends before writing one).
package org.fsdp4j.cli;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Optional;
import org.fsdp4j.metrics.JsonFiles;

final class OutputDir implements AutoCloseable {

    /** Kept in the directory for good (deleting a lock file races with a run about to lock it). */
    static final String LOCK_FILE = ".fsdp4j.lock";
    /** --save-dir's own, so that one directory can be both a run's --out and its --save-dir. */
    static final String SAVE_LOCK_FILE = ".fsdp4j-save.lock";

    /** How messages name a claimed directory: "output directory", "--out", and its lock file. */
    private record Kind(String noun, String flag, String lockFile) {
    }

    private static final Kind OUT = new Kind("output", "--out", LOCK_FILE);
    private static final Kind SAVE = new Kind("save", "--save-dir", SAVE_LOCK_FILE);

    private static final OutputDir NONE = new OutputDir(null, null, null);

    private final Path dir;                // null: no --out
    private final FileChannel lockChannel;
    private final FileLock lock;
    private final String[] reports;

    private OutputDir(Path dir, FileChannel lockChannel, FileLock lock, String... reports) {
        this.dir = dir;
        this.lockChannel = lockChannel;
        this.lock = lock;
        this.reports = reports;
    }

    /** Claims {@code dir} for {@code command}, which writes {@code reports} (no directory: a claim that writes nothing). */
    static OutputDir claim(Optional<Path> dir, String command, String... reports) {
        return claim(dir, OUT, true, command, reports);
    }

    /**
     * Claims --save-dir {@code dir} as --out is claimed, so that a run that saves only when
     * SIGTERM stops it does not find out then. {@code lock}: this process holds the lock for its
     * run (every process of a run saves into the directory, so only one of them takes it).
     */
    static OutputDir claimSaveDir(Optional<Path> dir, boolean lock, String command) {
        return claim(dir, SAVE, lock, command);
    }

    /** Refuses a {@code dir} given empty (''), which would quietly mean the current directory. */
    static void refuseEmpty(Optional<Path> dir, String flag) {
        if (dir.isPresent() && dir.get().toString().isEmpty()) {
            throw new UserError(ExitCode.BAD_INPUT, flag + " is empty: give it a directory (" + flag
                    + " . for this one)");
        }
    }

    private static OutputDir claim(Optional<Path> dir, Kind kind, boolean lock, String command, String... reports) {
        if (dir.isEmpty()) {
            return NONE;
        }
        refuseEmpty(dir, kind.flag());
        Path d = dir.get();
        if (Files.exists(d) && !Files.isDirectory(d)) {
            throw new UserError(ExitCode.BAD_INPUT, kind.noun() + " path " + d + " exists and is not a directory: pass "
                    + kind.flag() + " a directory");
        }
        try {
            Files.createDirectories(d);
        } catch (FileAlreadyExistsException e) {
            throw new UserError(ExitCode.BAD_INPUT, "cannot create " + kind.noun() + " directory " + d + ": " + e.getFile()
                    + " is not a directory: pass " + kind.flag() + " a directory you can write", e);
        } catch (IOException | InvalidPathException | SecurityException e) {
            throw new UserError(ExitCode.BAD_INPUT, "cannot create " + kind.noun() + " directory " + d + " (" + reason(e)
                    + "): pass " + kind.flag() + " a directory you can write", e);
        }
        OutputDir claimed = lock ? lock(d, kind, command, reports) : new OutputDir(d, null, null, reports);
        try {
            probe(d);
        } catch (IOException | RuntimeException e) {
            claimed.close();
            throw e instanceof UserError u ? u : new UserError(ExitCode.BAD_INPUT, "cannot write in " + kind.noun()
                    + " directory " + d + " (" + reason(e) + "): pass " + kind.flag() + " a directory you can write", e);
        }
        return claimed;
    }

    private static OutputDir lock(Path d, Kind kind, String command, String[] reports) {
        Path lockFile = d.resolve(kind.lockFile());
        FileChannel ch = null;
        try {
            ch = FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
            FileLock lock;
            try {
                lock = ch.tryLock();
            } catch (OverlappingFileLockException e) {
                lock = null;                    // this JVM holds it already (two commands in one process)
            }
            if (lock == null) {
                String holder = new String(Files.readAllBytes(lockFile), StandardCharsets.UTF_8).strip();
                throw new UserError(ExitCode.OUTPUT_IN_USE, kind.noun() + " directory " + d + " is in use by another run"
                        + (holder.isEmpty() ? "" : " (" + holder + ")")
                        + ": wait for it to finish or pass another " + kind.flag());
            }
            ch.truncate(0);
            ch.write(ByteBuffer.wrap(("pid " + ProcessHandle.current().pid() + ", fsdp4j " + command + ", since "
                    + Instant.now().truncatedTo(ChronoUnit.SECONDS) + "\n").getBytes(StandardCharsets.UTF_8)));
            ch.force(false);
            return new OutputDir(d, ch, lock, reports);
        } catch (IOException e) {
            closeQuietly(ch);
            throw new UserError(ExitCode.BAD_INPUT, "cannot write in " + kind.noun() + " directory " + d + " ("
                    + reason(e) + "): pass " + kind.flag() + " a directory you can write", e);
        } catch (RuntimeException e) {
            closeQuietly(ch);
            throw e;
        }
    }

    /** Writes and removes a file: what writing a report takes (create, write, rename needs the same rights). */
    private static void probe(Path d) throws IOException {
        // the processes of a run on several hosts probe one --save-dir, and their pids may be equal
        Path probe = d.resolve(".fsdp4j-probe-" + ProcessHandle.current().pid() + "-"
                + Long.toHexString(java.util.concurrent.ThreadLocalRandom.current().nextLong()));
        try {
            Files.write(probe, new byte[] {'o', 'k', '\n'}, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING);
        } finally {
            Files.deleteIfExists(probe);
        }
    }

    private static String reason(Exception e) {
        String m = e.getMessage();
        if (e instanceof java.nio.file.AccessDeniedException) {
            return "permission denied";
        }
        if (e instanceof java.nio.file.NoSuchFileException) {
            return "no such file or directory";
        }
        return m == null ? e.getClass().getSimpleName() : m;
    }

    private static void closeQuietly(FileChannel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // the open failed already; the first error is the one to report
            }
        }
    }

    /** The run starts: removes the reports an earlier run left, so none of them looks like this run's. */
    void removeEarlierReports() {
        if (dir == null) {
            return;
        }
        for (String report : reports) {
            try {
                Files.deleteIfExists(dir.resolve(report));
            } catch (IOException e) {
                throw new UserError(ExitCode.BAD_INPUT, "cannot remove the earlier " + dir.resolve(report) + " ("
                        + reason(e) + "): remove it or pass another --out", e);
            }
        }
    }

    /** Where report {@code name} goes; empty without --out. */
    Optional<Path> file(String name) {
        return Optional.ofNullable(dir).map(d -> d.resolve(name));
    }

    /** Writes {@code value} as JSON report {@code name} (atomically); returns its path, empty without --out. */
    Optional<Path> write(String name, Object value) {
        Optional<Path> file = file(name);
        file.ifPresent(f -> JsonFiles.writeAtomically(f, value));
        return file;
    }

    /** Releases the lock (the lock file stays). Idempotent. */
    @Override
    public void close() {
        if (lockChannel == null || !lockChannel.isOpen()) {
            return;
        }
        try {
            lock.release();
        } catch (IOException ignored) {
            // closing the channel releases it as well
        }
        closeQuietly(lockChannel);
    }
}
