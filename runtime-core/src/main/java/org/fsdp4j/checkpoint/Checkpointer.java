// The checkpoints of one --save-dir: saves on a background thread (the ranks' state is already on
// the host, so training goes on while the files are written; one save at a time: the next waits
// for the previous), keeps the last --keep complete ones, and finds the latest for
// --resume latest. A complete checkpoint is a directory step-NNNNNNNN with an index.json; a
// partial one (.step-NNNNNNNN.partial-<pid>, a save that did not finish) is never taken for one:
// it is named in a message, and removed once the process that wrote it is gone. In a run over
// several processes every process has one, each saving its own ranks into the one shared
// directory, and process 0 commits (SharedCheckpointWriter); only process 0 removes and prunes.
package org.fsdp4j.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.dist.ProcessGroup;

public final class Checkpointer implements AutoCloseable {

    static final String PARTIAL_SUFFIX = ".partial-";
    private static final Pattern COMPLETE = Pattern.compile("step-(\\d{8,})");
    private static final Pattern PARTIAL = Pattern.compile("\\.step-(\\d{8,})\\.(?:partial|old)-(\\d+)");

    /** A save: which step, where, how long the step was blocked, and (once written) how long the write took. */
    public record Save(int step, Path dir, double blockedMs, double writeMs, long bytes, int files) {
    }

    private final Path saveDir;
    private final int keep;
    private final Consumer<String> log;
    private final SharedCheckpointWriter shared;     // null in a run of one process
    private final ExecutorService writer;
    private Future<Save> pending;
    private final List<Save> done = new ArrayList<>();

    /** Saves into {@code saveDir}, keeping the last {@code keep}; {@code log} gets one line per finished save. */
    public Checkpointer(Path saveDir, int keep, Consumer<String> log) {
        this(saveDir, keep, log, null, null);
    }

    /**
     * As above for one process of a run over several ({@code processes}): every process saves
     * the same steps, each its own ranks, into {@code saveDir}, which all of them must see;
     * {@code timeout} bounds each wait for another process (the collective timeout).
     */
    public Checkpointer(Path saveDir, int keep, Consumer<String> log, ProcessGroup processes, Duration timeout) {
        if (keep < 1) {
            throw new IllegalArgumentException("--keep must be at least 1, got " + keep);
        }
        this.saveDir = saveDir;
        this.keep = keep;
        this.log = log;
        this.shared = processes == null ? null : new SharedCheckpointWriter(saveDir, keep, processes, timeout, log);
        this.writer = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "fsdp4j-checkpoint-writer");
            t.setDaemon(true);
            return t;
        });
    }

    static String dirName(int step) {
        return String.format("step-%08d", step);
    }

    /**
     * Queues the write of {@code state} (already copied to the host) described by {@code header}.
     * Waits first for a previous save still being written; {@code blockedMs} is what the caller
     * spent copying the state to the host, and the wait is added to it.
     */
    public synchronized void save(CheckpointIndex header, ShardedStateDict state, double copyMs) {
        long t0 = System.nanoTime();
        awaitPending();
        double blockedMs = copyMs + (System.nanoTime() - t0) / 1e6;
        pending = writer.submit(() -> {
            long w0 = System.nanoTime();
            CheckpointWriter.Written w;
            if (shared != null) {
                w = shared.write(header, state);        // process 0 prunes as it commits
            } else {
                removeStalePartials(saveDir, s -> { });
                w = CheckpointWriter.write(saveDir, header, state);
            }
            double writeMs = (System.nanoTime() - w0) / 1e6;
            if (shared == null) {
                prune(saveDir, keep);
            }
            Save s = new Save(header.step(), w.dir(), blockedMs, writeMs, w.bytes(), w.files());
            log.accept(String.format(java.util.Locale.ROOT,
                    "checkpoint: step %d saved to %s (%d files, %.1f MiB) in %.0f ms on a background thread;"
                            + " the step was blocked %.1f ms", s.step(), s.dir(), s.files(), s.bytes() / 1048576.0,
                    writeMs, blockedMs));
            return s;
        });
    }

    /** Waits for the save being written, if any; a failed write is rethrown (an UncheckedIOException). */
    public synchronized void awaitPending() {
        if (pending == null) {
            return;
        }
        try {
            done.add(pending.get());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for a checkpoint write", e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            throw c instanceof RuntimeException r ? r : new UncheckedIOException(new IOException(c));
        } finally {
            pending = null;
        }
    }

    /**
     * After a failed step of a run over several processes: the failure of the save in flight, if
     * it failed, waiting up to {@code wait} for it to end (a save fails promptly once another
     * process failed); empty when no save is in flight, it succeeded, or it is still going.
     */
    public synchronized Optional<RuntimeException> failureOfSaveInFlight(Duration wait) {
        if (pending == null) {
            return Optional.empty();
        }
        try {
            done.add(pending.get(wait.toMillis(), TimeUnit.MILLISECONDS));
            pending = null;
            return Optional.empty();
        } catch (TimeoutException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        } catch (ExecutionException e) {
            pending = null;
            Throwable c = e.getCause();
            return Optional.of(c instanceof RuntimeException r ? r : new UncheckedIOException(new IOException(c)));
        }
    }

    /** The saves written so far (not the one still being written). */
    public synchronized List<Save> saves() {
        return List.copyOf(done);
    }

    /** Removes complete checkpoints in {@code saveDir} beyond the last {@code keep}. */
    static void prune(Path saveDir, int keep) throws IOException {
        List<Path> all = complete(saveDir);
        for (int i = 0; i + keep < all.size(); i++) {
            CheckpointWriter.deleteTree(all.get(i));
        }
    }

    /** Complete checkpoints in {@code dir} (directories step-N with an index.json), oldest first. */
    public static List<Path> complete(Path dir) {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (var list = Files.list(dir)) {
            return list.filter(p -> COMPLETE.matcher(p.getFileName().toString()).matches())
                    .filter(p -> Files.isRegularFile(p.resolve(CheckpointIndex.FILE_NAME)))
                    .sorted(Comparator.comparingLong(Checkpointer::stepOf)).toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir + ": " + e.getMessage(), e);
        }
    }

    private static long stepOf(Path p) {
        Matcher m = COMPLETE.matcher(p.getFileName().toString());
        return m.matches() ? Long.parseLong(m.group(1)) : -1;
    }

    /**
     * The checkpoint --resume names: "latest" is the newest complete checkpoint under
     * {@code saveDir} (a partial save there is named in a message to {@code log} and skipped);
     * anything else is a checkpoint directory, or a save directory whose latest is taken.
     */
    public static Path resolve(String resume, Optional<Path> saveDir, Consumer<String> log) {
        Path where;
        if (resume.equals("latest")) {
            where = saveDir.orElseThrow(() -> new IllegalArgumentException(
                    "--resume latest needs --save-dir DIR (where to look for the latest checkpoint)"));
        } else {
            where = Path.of(resume);
        }
        if (Files.isRegularFile(where)) {        // e.g. a .safetensors export, or a checkpoint's index.json
            throw new CheckpointException(where, "is a file, not a checkpoint directory: give the checkpoint's"
                    + " directory (step-NNNNNNNN) or the --save-dir that holds it");
        }
        if (!Files.isDirectory(where)) {
            throw new CheckpointException(where, "no such checkpoint directory");
        }
        if (Files.exists(where.resolve(CheckpointIndex.FILE_NAME)) || COMPLETE.matcher(where.getFileName().toString()).matches()) {
            return where;                       // a checkpoint itself (the reader checks the index is there)
        }
        reportPartials(where, log);
        List<Path> all = complete(where);
        if (all.isEmpty()) {
            throw new CheckpointException(where, "holds no complete checkpoint (no step-NNNNNNNN directory with an "
                    + CheckpointIndex.FILE_NAME + ")");
        }
        return all.get(all.size() - 1);
    }

    /** Names every partial save in {@code dir} (a crash or kill during a save), which is ignored. */
    private static void reportPartials(Path dir, Consumer<String> log) {
        try (var list = Files.list(dir)) {
            list.filter(p -> PARTIAL.matcher(p.getFileName().toString()).matches()).sorted().forEach(p -> log.accept(
                    "checkpoint: ignoring " + p + ": a save that did not finish (the run stopped during it)"));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir + ": " + e.getMessage(), e);
        }
    }

    /** Removes partial saves whose writing process is gone (this one's own are replaced by the writer). */
    static void removeStalePartials(Path dir, Consumer<String> log) throws IOException {
        if (!Files.isDirectory(dir)) {
            return;
        }
        List<Path> stale = new ArrayList<>();
        try (var list = Files.list(dir)) {
            for (Path p : list.toList()) {
                Matcher m = PARTIAL.matcher(p.getFileName().toString());
                if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(2))).map(h -> !h.isAlive()).orElse(true)) {
                    stale.add(p);
                }
            }
        }
        for (Path p : stale) {
            log.accept("checkpoint: removing " + p + ": a save that did not finish");
            CheckpointWriter.deleteTree(p);
        }
    }

    /** Waits for the save being written, then stops the writer thread. */
    @Override
    public void close() {
        try {
            awaitPending();
        } finally {
            writer.shutdown();
        }
    }
}
