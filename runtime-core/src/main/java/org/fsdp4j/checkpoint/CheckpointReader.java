// Opens a checkpoint and checks everything before a value is used: the index is there and parses,
// its format version is known, every rank file has the size and the CRC-32C the index recorded,
// and the entries cover every element of every buffer of every parameter exactly once. Anything
// wrong is a CheckpointException naming the file and the problem. Then it serves any element
// range of any parameter's buffer (a StateSource), which is how a checkpoint saved at N ranks
// loads at M ranks or under another strategy: each rank asks for the ranges its new shard holds.
// Reads are positional (FileChannel), so ranks read concurrently without loading whole files.
package org.fsdp4j.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.zip.CRC32C;
import org.fsdp4j.api.StateSource;
import org.fsdp4j.metrics.JsonFiles;
import org.fsdp4j.model.HfModelConfig;
import org.fsdp4j.model.ModelConfig;

public final class CheckpointReader implements StateSource, AutoCloseable {

    private final Path dir;
    private final CheckpointIndex index;
    private final Map<String, FileChannel> channels = new HashMap<>();
    private final Map<String, Map<String, List<CheckpointIndex.Entry>>> byParam = new HashMap<>();   // param → buffer → entries by start
    private final Map<String, Long> numel = new HashMap<>();

    private CheckpointReader(Path dir, CheckpointIndex index) {
        this.dir = dir;
        this.index = index;
    }

    /** Opens and verifies the checkpoint in {@code dir} (reads every file once for its checksum). */
    public static CheckpointReader open(Path dir) {
        Path indexFile = dir.resolve(CheckpointIndex.FILE_NAME);
        if (!Files.isDirectory(dir)) {
            throw new CheckpointException(dir, "no such checkpoint directory");
        }
        if (!Files.exists(indexFile)) {
            throw new CheckpointException(indexFile, "missing: not a complete checkpoint (a save that did not finish,"
                    + " or not a checkpoint directory)");
        }
        CheckpointIndex index;
        try {
            index = JsonFiles.read(indexFile, CheckpointIndex.class);
        } catch (IOException e) {
            throw new CheckpointException(indexFile, "not a readable index (" + firstLine(e.getMessage()) + ")", e);
        }
        if (index == null || !CheckpointIndex.FORMAT.equals(index.format())) {
            throw new CheckpointException(indexFile, "not an fsdp4j checkpoint index (format is not "
                    + CheckpointIndex.FORMAT + ")");
        }
        if (index.formatVersion() != CheckpointIndex.FORMAT_VERSION) {
            throw new CheckpointException(indexFile, "format version " + index.formatVersion() + " is not supported"
                    + " (this fsdp4j reads version " + CheckpointIndex.FORMAT_VERSION + ")");
        }
        if (index.model() == null || index.params() == null || index.files() == null || index.entries() == null
                || index.buffers() == null || index.optimizer() == null || index.data() == null
                || index.lossScaler() == null) {
            throw new CheckpointException(indexFile, "incomplete index (a field is missing)");
        }
        checkWellFormed(indexFile, index);
        CheckpointReader r = new CheckpointReader(dir, index);
        try {
            r.verifyFiles();
            r.verifyCoverage(indexFile);
        } catch (RuntimeException e) {
            r.close();
            throw e;
        }
        return r;
    }

    /**
     * Every list element and name is present and every shape is sizes whose product fits a long:
     * a hand-edited or corrupt index (a null in a list, a file name that is no path, a shape that
     * overflows) is one CheckpointException here instead of a NullPointerException or a wrapped
     * count later.
     */
    private static void checkWellFormed(Path indexFile, CheckpointIndex index) {
        for (String b : index.buffers()) {
            if (b == null) {
                throw new CheckpointException(indexFile, "incomplete index (a buffer name is missing)");
            }
        }
        for (CheckpointIndex.Param p : index.params()) {
            if (p == null || p.name() == null || p.shape() == null) {
                throw new CheckpointException(indexFile, "incomplete index (a parameter's name or shape is missing)");
            }
            long n = 1;
            for (long d : p.shape()) {
                if (d < 0 || (d > 0 && n > Long.MAX_VALUE / d)) {
                    throw new CheckpointException(indexFile, "parameter " + p.name() + " has shape "
                            + java.util.Arrays.toString(p.shape()) + ", not a list of sizes");
                }
                n *= d;
            }
        }
        for (CheckpointIndex.RankFile f : index.files()) {
            if (f == null || f.file() == null || f.crc32c() == null) {
                throw new CheckpointException(indexFile, "incomplete index (a rank file's name or checksum is missing)");
            }
            try {
                Path.of(f.file());
            } catch (java.nio.file.InvalidPathException e) {
                throw new CheckpointException(indexFile, "names a file that is no path: " + f.file());
            }
        }
        for (CheckpointIndex.Entry e : index.entries()) {
            if (e == null) {
                throw new CheckpointException(indexFile, "incomplete index (an entry is missing)");
            }
        }
    }

    private static String firstLine(String s) {
        return s == null ? "" : s.lines().findFirst().orElse("");
    }

    private void verifyFiles() {
        for (CheckpointIndex.RankFile f : index.files()) {
            Path p = dir.resolve(f.file());
            if (!p.normalize().startsWith(dir.normalize()) || f.file().contains("/")) {
                throw new CheckpointException(dir.resolve(CheckpointIndex.FILE_NAME), "names a file outside the checkpoint: "
                        + f.file());
            }
            try {
                FileChannel ch = FileChannel.open(p, StandardOpenOption.READ);
                channels.put(f.file(), ch);
                long size = ch.size();
                if (size != f.bytes()) {
                    throw new CheckpointException(p, (size < f.bytes() ? "truncated: " : "wrong size: ") + size
                            + " bytes, the index says " + f.bytes());
                }
                String actual = CheckpointWriter.crc32cOf(ch);
                if (!actual.equalsIgnoreCase(f.crc32c())) {
                    throw new CheckpointException(p, "checksum mismatch (CRC-32C " + actual + ", the index says "
                            + f.crc32c() + "): the file is corrupted");
                }
            } catch (NoSuchFileException e) {
                throw new CheckpointException(p, "missing (the index lists it)", e);
            } catch (IOException e) {
                throw new CheckpointException(p, "cannot read: " + e.getMessage(), e);
            }
        }
    }

    /** Every buffer of every parameter is covered exactly once by entries inside their files. */
    private void verifyCoverage(Path indexFile) {
        Map<String, Long> fileBytes = new HashMap<>();
        index.files().forEach(f -> fileBytes.put(f.file(), f.bytes()));
        for (CheckpointIndex.Param p : index.params()) {
            numel.put(p.name(), p.numel());
            Map<String, List<CheckpointIndex.Entry>> m = new HashMap<>();
            index.buffers().forEach(b -> m.put(b, new ArrayList<>()));
            byParam.put(p.name(), m);
        }
        for (CheckpointIndex.Entry e : index.entries()) {
            var m = byParam.get(e.param());
            if (m == null || !m.containsKey(e.buffer())) {
                throw new CheckpointException(indexFile, "an entry names " + e.param() + " " + e.buffer()
                        + ", which the index does not declare");
            }
            Long size = fileBytes.get(e.file());
            // Compared without products or sums that could wrap: an entry claiming 2^62 elements must not pass as 0 bytes.
            if (size == null || e.start() < 0 || e.end() <= e.start() || e.end() > numel.get(e.param())
                    || e.offset() < 0 || e.offset() > size || (e.end() - e.start()) > (size - e.offset()) / 4) {
                throw new CheckpointException(indexFile, "entry " + e.param() + " " + e.buffer() + " [" + e.start() + ", "
                        + e.end() + ") in " + e.file() + " at byte " + e.offset() + " is out of range");
            }
            m.get(e.buffer()).add(e);
        }
        for (var p : byParam.entrySet()) {
            for (var b : p.getValue().entrySet()) {
                List<CheckpointIndex.Entry> list = b.getValue();
                list.sort(Comparator.comparingLong(CheckpointIndex.Entry::start));
                long next = 0;
                for (CheckpointIndex.Entry e : list) {
                    if (e.start() != next) {
                        throw new CheckpointException(indexFile, p.getKey() + " " + b.getKey() + ": elements ["
                                + Math.min(next, e.start()) + ", " + Math.max(next, e.start()) + ") are "
                                + (e.start() > next ? "missing" : "saved twice"));
                    }
                    next = e.end();
                }
                if (next != numel.get(p.getKey())) {
                    throw new CheckpointException(indexFile, p.getKey() + " " + b.getKey() + ": elements [" + next + ", "
                            + numel.get(p.getKey()) + ") are missing");
                }
            }
        }
    }

    public CheckpointIndex index() {
        return index;
    }

    public Path dir() {
        return dir;
    }

    /** Refuses a checkpoint of another model (family or shape) than {@code model}, naming both. */
    public void checkModel(ModelConfig model) {
        HfModelConfig mine = model.hf();
        HfModelConfig saved = index.model();
        if (!saved.keys().equals(mine.keys())) {
            // in the flags the user typed, only those that differ (all of a family's differ from another's)
            Map<String, String> theirs = saved.flags();
            Map<String, String> ours = mine.flags();
            StringBuilder it = new StringBuilder();
            StringBuilder run = new StringBuilder();
            for (String key : theirs.get("--model").equals(ours.get("--model")) ? theirs.keySet() : Set.of("--model")) {
                if (!theirs.get(key).equals(ours.get(key))) {
                    it.append(it.length() == 0 ? "" : " ").append(key).append(' ').append(theirs.get(key));
                    run.append(run.length() == 0 ? "" : " ").append(key).append(' ').append(ours.get(key));
                }
            }
            throw new CheckpointException(dir.resolve(CheckpointIndex.FILE_NAME), "a checkpoint of another model: it has "
                    + it + ", this run " + run + "; resume with the model it was saved with (checkpoint inspect shows it)");
        }
    }

    @Override
    public void read(String param, String buffer, long start, float[] out, int offset, int count) {
        var m = byParam.get(param);
        List<CheckpointIndex.Entry> entries = m == null ? null : m.get(buffer);
        if (entries == null) {
            throw new CheckpointException(dir.resolve(CheckpointIndex.FILE_NAME), "holds no " + buffer + " of parameter "
                    + param + " (a checkpoint of another model or optimizer?)");
        }
        long end = start + count;
        if (start < 0 || end > numel.get(param)) {
            throw new IllegalArgumentException("elements [" + start + ", " + end + ") are outside " + param);
        }
        for (CheckpointIndex.Entry e : entries) {
            long lo = Math.max(start, e.start());
            long hi = Math.min(end, e.end());
            if (lo >= hi) {
                continue;
            }
            ByteBuffer buf = ByteBuffer.allocate(Math.toIntExact(4 * (hi - lo))).order(ByteOrder.LITTLE_ENDIAN);
            long pos = e.offset() + 4 * (lo - e.start());
            try {
                FileChannel ch = channels.get(e.file());
                while (buf.hasRemaining()) {
                    if (ch.read(buf, pos + buf.position()) < 0) {
                        throw new CheckpointException(dir.resolve(e.file()), "truncated while reading");
                    }
                }
            } catch (IOException ex) {
                throw new UncheckedIOException("cannot read " + dir.resolve(e.file()) + ": " + ex.getMessage(), ex);
            }
            buf.flip();
            buf.asFloatBuffer().get(out, offset + (int) (lo - start), (int) (hi - lo));
        }
    }

    /** The whole of {@code param}'s {@code buffer} (the export's consolidation). */
    public float[] full(String param, String buffer) {
        Long n = numel.get(param);
        if (n == null) {
            throw new IllegalArgumentException("no parameter " + param + " in " + dir);
        }
        float[] out = new float[Math.toIntExact(n)];
        read(param, buffer, 0, out, 0, out.length);
        return out;
    }

    @Override
    public void close() {
        for (FileChannel ch : channels.values()) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // read-only: nothing to lose
            }
        }
        channels.clear();
    }
}
