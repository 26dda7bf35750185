// Writes one checkpoint from the ranks' host copies (a ShardedStateDict), so that it is either complete or
// not there: every file goes into a hidden partial directory (.step-00000020.partial-<pid>), is
// synced, then index.json is written and synced last, and the directory is renamed to
// step-00000020 (an atomic rename in the same directory) and the parent synced. A crash at any
// point leaves at most a partial directory, which readers ignore (Checkpointer says so).
//
// Each rank of replica 0 writes one file: for every unit, every parameter slice its shard holds
// (a Slice: name, element range), every buffer (master, exp_avg, exp_avg_sq) as fp32
// little-endian; the index's entries say where. Replicas hold the same values and write nothing.
// The two halves are separate (writeRanks: one process's files, a CheckpointPart; commit: the
// index of every part, the rename) because over several processes each writes its own ranks
// and process 0 alone commits (SharedCheckpointWriter).
package org.fsdp4j.checkpoint;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.metrics.JsonFiles;

public final class CheckpointWriter {

    /**
     * Test hook: milliseconds to sleep after each 1 MiB written, so a test can kill the process in
     * the middle of a save. 0 (the default) in every real run.
     */

    private static final int CHUNK_BYTES = 1 << 20;

    private CheckpointWriter() {
    }

    /** What a write produced: the checkpoint directory and its total bytes. */
    public record Written(Path dir, long bytes, int files) {
    }

    /**
     * Writes {@code state} (every rank's shards) with the run's description {@code header} (its params,
     * files and entries are filled in here) as {@code saveDir}/step-NNNNNNNN. An existing
     * checkpoint of the same step is replaced only once the new one is complete.
     */
    public static Written write(Path saveDir, CheckpointIndex header, ShardedStateDict state) {
        Path partial = saveDir.resolve(partialName(header.step(), ProcessHandle.current().pid()));
        try {
            Files.createDirectories(saveDir);
            deleteTree(partial);
            Files.createDirectory(partial);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write checkpoint " + saveDir.resolve(Checkpointer.dirName(header.step()))
                    + ": " + e.getMessage(), e);
        }
        try {
            CheckpointPart part = writeRanks(partial, 0, state, () -> { });
            return commit(saveDir, partial, header, state.bufferNames(), List.of(part));
        } catch (RuntimeException e) {
            try {
                deleteTree(partial);            // never to be committed: a full disk gets its room back
            } catch (IOException | UncheckedIOException stillThere) {
                e.addSuppressed(stillThere);
            }
            throw e;
        }
    }

    /** "rank-00003.bin": the file of a rank's shards. */
    static String rankFileName(int worldRank) {
        return String.format("rank-%05d.bin", worldRank);
    }

    /** ".step-00000020.partial-4242": where the save of {@code step} by process {@code pid} is written. */
    static String partialName(int step, long pid) {
        return "." + Checkpointer.dirName(step) + Checkpointer.PARTIAL_SUFFIX + pid;
    }

    /**
     * Writes the files of {@code state}'s ranks of replica 0 into {@code partial} and syncs each;
     * returns what they hold as process {@code process}'s part. {@code check} runs before each
     * 1 MiB is written (a run over several processes stops a save there when another failed).
     */
    static CheckpointPart writeRanks(Path partial, int process, ShardedStateDict state, Runnable check) {
        List<CheckpointIndex.RankFile> files = new ArrayList<>();
        List<CheckpointIndex.Entry> entries = new ArrayList<>();
        for (ShardedStateDict.RankShard s : state.ranks()) {
            if (s.replicaIndex() != 0) {
                continue;                       // a replica of shards replica 0 writes
            }
            String name = rankFileName(s.worldRank());
            try {
                files.add(writeRank(partial.resolve(name), name, s, state.bufferNames(), entries, check));
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write " + partial.resolve(name) + ": " + e.getMessage(), e);
            }
        }
        return new CheckpointPart(process, params(state), files, entries);
    }

    /**
     * Makes {@code partial} (holding every part's files) the checkpoint {@code saveDir}/step-NNNNNNNN:
     * one index.json of {@code header} and every part (parts in process order, as the ranks are),
     * written and synced, then the rename and the parent's sync. Process 0 alone calls it.
     */
    static Written commit(Path saveDir, Path partial, CheckpointIndex header, List<String> bufferNames,
                          List<CheckpointPart> parts) {
        Path finalDir = saveDir.resolve(Checkpointer.dirName(header.step()));
        Map<String, CheckpointIndex.Param> params = new LinkedHashMap<>();
        List<CheckpointIndex.RankFile> files = new ArrayList<>();
        List<CheckpointIndex.Entry> entries = new ArrayList<>();
        long total = 0;
        for (CheckpointPart part : parts) {
            part.params().forEach(p -> params.putIfAbsent(p.name(), p));   // the order one process meets them in
            files.addAll(part.files());
            entries.addAll(part.entries());
            total += part.files().stream().mapToLong(CheckpointIndex.RankFile::bytes).sum();
        }
        CheckpointIndex index = new CheckpointIndex(header.format(), header.formatVersion(), header.step(),
                header.model(), header.preset(), header.strategy(), header.worldSize(), header.shardSize(),
                header.paramDtype(), header.reduceDtype(), header.stateDtype(), bufferNames,
                header.optimizer(), header.lossScaler(), header.data(), header.losses(), List.copyOf(params.values()),
                List.copyOf(files), List.copyOf(entries));
        try {
            Path indexFile = partial.resolve(CheckpointIndex.FILE_NAME);
            JsonFiles.writeAtomically(indexFile, index);
            sync(indexFile);
            sync(partial);
            if (Files.exists(finalDir)) {               // the same step saved before (a resumed run): replace it
                Path old = saveDir.resolve("." + Checkpointer.dirName(header.step()) + ".old-" + ProcessHandle.current().pid());
                Files.move(finalDir, old, StandardCopyOption.ATOMIC_MOVE);
                Files.move(partial, finalDir, StandardCopyOption.ATOMIC_MOVE);
                deleteTree(old);
            } else {
                Files.move(partial, finalDir, StandardCopyOption.ATOMIC_MOVE);
            }
            sync(saveDir);
            return new Written(finalDir, total, files.size());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write checkpoint " + finalDir + ": " + e.getMessage(), e);
        }
    }

    /** Every parameter's name and shape, in model order. */
    private static List<CheckpointIndex.Param> params(ShardedStateDict state) {
        List<CheckpointIndex.Param> out = new ArrayList<>();
        state.shapes().forEach((name, shape) -> out.add(new CheckpointIndex.Param(name, shape)));
        return List.copyOf(out);
    }

    private static CheckpointIndex.RankFile writeRank(Path file, String name, ShardedStateDict.RankShard s,
                                                      List<String> bufferNames, List<CheckpointIndex.Entry> entries,
                                                      Runnable check) throws IOException {
        long delayMs = Fsdp4jSystemProperties.checkpointChunkDelayMs();
        CRC32C crc = new CRC32C();
        ByteBuffer buf = ByteBuffer.allocate(CHUNK_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        long offset = 0;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            for (ShardedStateDict.UnitShard u : s.units()) {
                for (ShardedStateDict.Slice slice : u.slices()) {
                    for (int b = 0; b < bufferNames.size(); b++) {
                        float[] values = u.buffers().get(b);
                        int from = slice.shardOffset();
                        int count = slice.numel();
                        entries.add(new CheckpointIndex.Entry(slice.param(), bufferNames.get(b),
                                slice.paramOffset(), slice.paramOffset() + count, name, offset));
                        for (int done = 0; done < count; ) {        // bulk copies through the 1 MiB buffer
                            if (!buf.hasRemaining()) {
                                check.run();
                                flush(ch, buf, crc, delayMs);
                            }
                            int n = Math.min(count - done, buf.remaining() / 4);
                            buf.asFloatBuffer().put(values, from + done, n);
                            buf.position(buf.position() + 4 * n);
                            done += n;
                        }
                        offset += 4L * count;
                    }
                }
            }
            flush(ch, buf, crc, 0);
            ch.force(true);
        }
        return new CheckpointIndex.RankFile(name, s.worldRank(), s.shardIndex(), offset,
                HexFormat.of().toHexDigits((int) crc.getValue()));
    }

    private static void flush(FileChannel ch, ByteBuffer buf, CRC32C crc, long delayMs) throws IOException {
        buf.flip();
        crc.update(buf.duplicate());
        while (buf.hasRemaining()) {
            ch.write(buf);
        }
        buf.clear();
        if (delayMs > 0) {
            try {
                Thread.sleep(delayMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while writing", e);
            }
        }
    }

    /** CRC-32C of {@code file}'s bytes, 8 hex digits (as the index records it). */
    static String crc32cOf(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return crc32cOf(ch);
        }
    }

    /** CRC-32C of every byte of {@code ch} (read by position: its own position is left alone), 8 hex digits. */
    static String crc32cOf(FileChannel ch) throws IOException {
        CRC32C crc = new CRC32C();
        ByteBuffer buf = ByteBuffer.allocateDirect(CHUNK_BYTES);
        for (long at = 0; ; ) {
            buf.clear();
            int n = ch.read(buf, at);
            if (n < 0) {
                break;
            }
            buf.flip();
            crc.update(buf);
            at += n;
        }
        return HexFormat.of().toHexDigits((int) crc.getValue());
    }

    /** fsync of a file or a directory (a directory's entries: the renames into it). */
    static void sync(Path p) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (var walk = Files.walk(dir)) {
            for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
