// Writes one checkpoint of a run over several processes into one directory they all see, as a
// two-phase commit through the rendezvous store, so that the checkpoint is complete or not there:
//
//   1. process 0 creates the partial directory (.step-NNNNNNNN.partial-<its pid>) and publishes
//      its name; the others check they see it;
//   2. every process writes its own ranks' files there (replica 0's, as in one process), syncs
//      them, writes its part (CheckpointPart: files, sizes, checksums, entries) as a small file
//      beside them and publishes that file's size and checksum; process 0, its own files synced,
//      waits for every part (prepared: every shard is durable);
//   3. process 0 checks that it sees every part and every rank file with the size and CRC-32C
//      their writer recorded (else --save-dir is not shared: one error naming the process and host),
//      merges the parts into one index.json (the format of a one-process checkpoint, so readers,
//      export and --resume at any layout are unchanged), syncs, renames the directory to
//      step-NNNNNNNN, syncs the parent, prunes (--keep), and publishes "committed"; the others
//      wait for that, so their save ends only once the checkpoint exists.
//
// The index is written only after every shard is durable, so a process that dies before the
// commit leaves no index, only a partial directory (which readers skip and process 0 of a later
// run removes). It runs on the Checkpointer's thread and meets the others only through the
// ProcessGroup's primitives for work beside the step (publish and await, on their own store
// connection), never the step's vote. Every wait is for a key one process answers, and a process
// that fails on its own (it cannot see the directory, cannot write) answers it with its failure
// and leaves the run's abort reason, so the others stop at once, before it ends and, for process
// 0, takes the store with it. When another process fails or the run aborts, the save fails with
// one CommException naming the process at the root of it and this save.
package org.fsdp4j.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.zip.CRC32C;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.metrics.JsonFiles;

final class SharedCheckpointWriter {

    /** How long a process looks for a directory another created (a shared filesystem's caches may lag). */
    private static final Duration VISIBLE_WITHIN = Duration.ofSeconds(5);
    /** What a process that failed publishes, followed by why, under the keys the others wait for. */
    private static final String FAILED = "failed: ";
    /** How often a process writing its files looks whether another failed meanwhile. */
    private static final long CHECK_EVERY_NANOS = 200_000_000L;

    private final Path saveDir;
    private final int keep;
    private final ProcessGroup processes;
    private final Duration timeout;
    private final Consumer<String> log;
    private long lastCheck;

    /**
     * Saves into {@code saveDir} (which every process of {@code processes} must see), keeping
     * {@code keep}; every wait for another process lasts up to {@code timeout} (the collective timeout).
     */
    SharedCheckpointWriter(Path saveDir, int keep, ProcessGroup processes, Duration timeout, Consumer<String> log) {
        this.saveDir = saveDir;
        this.keep = keep;
        this.processes = processes;
        this.timeout = timeout;
        this.log = log;
    }

    /**
     * Saves step {@code header.step()}: every process calls it with its own ranks' {@code state}
     * (process 0's {@code header} is the index's); returns the committed checkpoint once process 0
     * has committed it.
     */
    CheckpointWriter.Written write(CheckpointIndex header, ShardedStateDict state) {
        int step = header.step();
        int me = processes.process();
        String key = "checkpoint/" + step + "/";
        Path partial = null;
        boolean handedOver = false;         // this process's files are process 0's to commit (or discard) now
        try {
            partial = me == 0 ? createPartial(step, key) : findPartial(step, key);
            CheckpointPart part = CheckpointWriter.writeRanks(partial, me, state, this::stopIfAnotherFailed);
            if (me != 0) {
                handedOver = true;
                processes.publish(key + "part/" + me, writePart(partial, part).getBytes(StandardCharsets.UTF_8));
                String[] committed = awaitFrom(0, key + "committed", "the commit of step " + step + " by "
                        + processes.describe(0)).split("\t");
                return new CheckpointWriter.Written(saveDir.resolve(committed[0]), Long.parseLong(committed[1]),
                        Integer.parseInt(committed[2]));
            }
            List<CheckpointPart> parts = new ArrayList<>(List.of(part));
            for (int q = 1; q < processes.processCount(); q++) {     // prepared: every process's files are durable
                parts.add(readPart(partial, q, awaitFrom(q, key + "part/" + q, "the files of " + processes.describe(q)
                        + " for the save of step " + step)));
            }
            for (int q = 1; q < processes.processCount(); q++) {
                Files.deleteIfExists(partial.resolve(CheckpointPart.fileName(q)));   // merged into the index
            }
            CheckpointWriter.Written w = CheckpointWriter.commit(saveDir, partial, header, state.bufferNames(), parts);
            Checkpointer.prune(saveDir, keep);
            processes.publish(key + "committed", (w.dir().getFileName() + "\t" + w.bytes() + "\t" + w.files())
                    .getBytes(StandardCharsets.UTF_8));
            return w;
        } catch (IOException e) {
            RuntimeException f = failed(new UncheckedIOException("cannot write the checkpoint of step " + step + " in "
                    + saveDir + ": " + e.getMessage(), e), step, key);
            discard(partial, state, handedOver);
            throw f;
        } catch (RuntimeException e) {
            RuntimeException f = failed(e, step, key);
            discard(partial, state, handedOver);
            throw f;
        }
    }

    /**
     * After a failed save (the others told first, so none waits on files that vanish): process 0
     * removes the partial directory, whose save can no longer commit; another process removes the
     * files it wrote unless it had handed them over (process 0 may be committing them). A full
     * disk is then as full as before the save. What a killed process leaves, process 0 of the next
     * save removes.
     */
    private void discard(Path partial, ShardedStateDict state, boolean handedOver) {
        if (partial == null) {
            return;
        }
        try {
            if (processes.process() == 0) {
                CheckpointWriter.deleteTree(partial);
            } else if (!handedOver) {
                for (ShardedStateDict.RankShard s : state.ranks()) {
                    Files.deleteIfExists(partial.resolve(CheckpointWriter.rankFileName(s.worldRank())));
                }
            }
        } catch (IOException | UncheckedIOException e) {
            log.accept("checkpoint: could not remove " + partial + " after the failed save: " + e.getMessage());
        }
    }

    /**
     * What process {@code q} published under {@code key} for this save; a process that failed
     * answers with its failure instead (FAILED), so that nobody waits on a process about to end.
     */
    private String awaitFrom(int q, String key, String what) {
        String value = text(processes.await(key, what, timeout));
        if (value.startsWith(FAILED)) {
            throw new PeerFailed(processes.describe(q) + " failed: " + value.substring(FAILED.length()));
        }
        return value;
    }

    /** Another process answered that it failed (before this one read the run's abort reason). */
    private static final class PeerFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        PeerFailed(String message) {
            super(message);
        }
    }

    /** Process 0: removes stale partial saves, creates this one's directory and tells the others its name. */
    private Path createPartial(int step, String key) throws IOException {
        Checkpointer.removeStalePartials(saveDir, log);
        Path partial = saveDir.resolve(CheckpointWriter.partialName(step, ProcessHandle.current().pid()));
        Files.createDirectories(saveDir);
        CheckpointWriter.deleteTree(partial);
        Files.createDirectory(partial);
        processes.publish(key + "dir", partial.getFileName().toString().getBytes(StandardCharsets.UTF_8));
        return partial;
    }

    /** The others: the directory process 0 created, once this process sees it. */
    private Path findPartial(int step, String key) {
        Path partial = saveDir.resolve(awaitFrom(0, key + "dir", "the directory of the save of step " + step + " from "
                + processes.describe(0)));
        long deadline = System.nanoTime() + VISIBLE_WITHIN.toNanos();
        while (!Files.isDirectory(partial)) {
            if (System.nanoTime() > deadline) {
                throw new SaveDirNotSharedException("--save-dir", saveDir, processes.describe(processes.process())
                        + " cannot see " + partial.getFileName() + ", which " + processes.describe(0) + " created there");
            }
            stopIfAnotherFailed();
            sleep(50);
        }
        return partial;
    }

    /** Writes this process's part beside its files and syncs it; returns "bytes crc32c" for the store. */
    private static String writePart(Path partial, CheckpointPart part) throws IOException {
        byte[] bytes = JsonFiles.toJson(part).getBytes(StandardCharsets.UTF_8);
        try (FileChannel ch = FileChannel.open(partial.resolve(CheckpointPart.fileName(part.process())),
                StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.wrap(bytes);
            while (b.hasRemaining()) {
                ch.write(b);
            }
            ch.force(true);
        }
        CheckpointWriter.sync(partial);             // this process's files are entries of the directory
        return bytes.length + " " + crc32c(bytes);
    }

    /**
     * Process 0: process {@code q}'s part, read from the directory and checked against what {@code q}
     * published ("bytes crc32c"), and every rank file it lists checked for its size and checksum.
     */
    private CheckpointPart readPart(Path partial, int q, String published) throws IOException {
        String[] sizeAndCrc = published.split(" ");
        Path file = partial.resolve(CheckpointPart.fileName(q));
        if (!Files.isRegularFile(file)) {
            throw notShared(partial, q, file.getFileName().toString(), "it is not there");
        }
        byte[] bytes = Files.readAllBytes(file);
        if (bytes.length != Long.parseLong(sizeAndCrc[0]) || !crc32c(bytes).equals(sizeAndCrc[1])) {
            throw notShared(partial, q, file.getFileName().toString(), "its contents differ from what it wrote");
        }
        CheckpointPart part = JsonFiles.read(file, CheckpointPart.class);
        for (CheckpointIndex.RankFile f : part.files()) {
            Path p = partial.resolve(f.file());
            if (f.file().contains("/") || !Files.isRegularFile(p)) {
                throw notShared(partial, q, f.file(), "it is not there");
            }
            long size = Files.size(p);
            if (size != f.bytes()) {
                throw notShared(partial, q, f.file(), size + " bytes where it wrote " + f.bytes());
            }
            String crc = CheckpointWriter.crc32cOf(p);
            if (!crc.equalsIgnoreCase(f.crc32c())) {
                throw notShared(partial, q, f.file(), "CRC-32C " + crc + " where it wrote " + f.crc32c());
            }
        }
        return part;
    }

    private SaveDirNotSharedException notShared(Path partial, int q, String file, String detail) {
        return new SaveDirNotSharedException("--save-dir", saveDir, processes.describe(0) + " cannot see " + file
                + " as " + processes.describe(q) + " wrote it into " + partial.getFileName() + " (" + detail + ")");
    }

    /** Between chunks of this process's files: throws (a few times a second at most) once another process failed. */
    private void stopIfAnotherFailed() {
        long now = System.nanoTime();
        if (now - lastCheck < CHECK_EVERY_NANOS) {
            return;
        }
        lastCheck = now;
        Optional<String> why = processes.rootFailure();
        if (why.isPresent()) {
            throw new CommException(why.get());
        }
    }

    /**
     * What a failed save throws: when another process failed (or the run aborted), one
     * CommException naming it and this save, whatever this process saw of it (a lost store, an
     * answer that did not come); a wait that timed out as it is; and this process's own failure as
     * it is, after leaving its reason for the others (the run's abort reason, and the answer to
     * whatever they wait for from this process), so that they stop now, not at their timeout.
     */
    private RuntimeException failed(RuntimeException e, int step, String key) {
        // a process's own answer first: by the time the abort reason is read, it may have ended with the store
        Optional<String> root = e instanceof PeerFailed ? Optional.of(e.getMessage()) : processes.rootFailure();
        if (root.isPresent()) {
            CommException c = new CommException(root.get() + ", during the save of step " + step
                    + " (not committed: --resume latest takes the last complete checkpoint)");
            c.addSuppressed(e);         // not its cause: what this process saw is a consequence
            return c;
        }
        if (!(e instanceof CommException) && !(e instanceof PeerFailed)) {
            processes.fail(String.valueOf(e.getMessage()));
            byte[] why = (FAILED + e.getMessage()).getBytes(StandardCharsets.UTF_8);
            try {
                if (processes.process() == 0) {
                    processes.publish(key + "dir", why);        // harmless if the others have it already
                    processes.publish(key + "committed", why);
                } else {
                    processes.publish(key + "part/" + processes.process(), why);
                }
            } catch (RuntimeException storeGone) {
                e.addSuppressed(storeGone);     // the others learn it from the abort reason or the lost store
            }
        }
        return e;
    }

    private static String text(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static String crc32c(byte[] bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes);
        return HexFormat.of().toHexDigits((int) crc.getValue());
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted during a checkpoint save", e);
        }
    }
}
