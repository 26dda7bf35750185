// Writes one checkpoint from the ranks' host copies (a ShardedStateDict), so that it is either complete or
// not there: every file goes into a hidden partial directory (.step-00000020.partial-<pid>), is
// synced, then index.json is written and synced last, and the directory is renamed to
// step-00000020 (an atomic rename in the same directory) and the parent synced. A crash at any
// point leaves at most a partial directory, which readers ignore (Checkpointer says so).
//
// Each rank of replica 0 writes one file: for every unit, every parameter slice its shard holds
// (a Slice: name, element range), every buffer (master, exp_avg, exp_avg_sq) as fp32
// little-endian; the index's entries say where. Replicas hold the same values and write nothing.
package org.fsdp4j.checkpoint;

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
import java.util.List;
import java.util.zip.CRC32C;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.metrics.JsonFiles;

public final class CheckpointWriter {

    /**
     * Test hook: milliseconds to sleep after each 1 MiB written, so a test can kill the process in
     * the middle of a save. 0 (the default) in every real run.
     */
    static final String CHUNK_DELAY_PROPERTY = "fsdp4j.checkpoint.chunkDelayMs";

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
        Path finalDir = saveDir.resolve(Checkpointer.dirName(header.step()));
        Path partial = saveDir.resolve("." + Checkpointer.dirName(header.step()) + Checkpointer.PARTIAL_SUFFIX
                + ProcessHandle.current().pid());
        try {
            Files.createDirectories(saveDir);
            deleteTree(partial);
            Files.createDirectory(partial);
            List<CheckpointIndex.RankFile> files = new ArrayList<>();
            List<CheckpointIndex.Entry> entries = new ArrayList<>();
            long total = 0;
            for (ShardedStateDict.RankShard s : state.ranks()) {
                if (s.replicaIndex() != 0) {
                    continue;                       // a replica of shards replica 0 writes
                }
                String name = String.format("rank-%05d.bin", s.worldRank());
                CheckpointIndex.RankFile f = writeRank(partial.resolve(name), name, s, state.bufferNames(), entries);
                files.add(f);
                total += f.bytes();
            }
            CheckpointIndex index = new CheckpointIndex(header.format(), header.formatVersion(), header.step(),
                    header.model(), header.preset(), header.strategy(), header.worldSize(), header.shardSize(),
                    header.paramDtype(), header.reduceDtype(), header.stateDtype(), state.bufferNames(),
                    header.optimizer(), header.lossScaler(), header.data(), header.losses(), params(state),
                    List.copyOf(files), List.copyOf(entries));
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
                                                      List<String> bufferNames, List<CheckpointIndex.Entry> entries)
            throws IOException {
        long delayMs = Long.getLong(CHUNK_DELAY_PROPERTY, 0);
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
