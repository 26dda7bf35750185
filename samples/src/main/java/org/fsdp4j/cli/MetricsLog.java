// metrics.jsonl in --out: one JSON object per step, appended and flushed as the step ends, so a
// person (tail -f) or a program can follow a run while it goes and read it after a crash. A line
// that cannot be written whole (a full disk) is cut off again, so the file ends with the last
// complete step and every line parses. val_loss is there only on the steps a validation loss
// was measured after (--eval-every).
package org.fsdp4j.cli;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import org.fsdp4j.metrics.JsonFiles;
import org.fsdp4j.train.StepResult;

final class MetricsLog implements AutoCloseable {

    static final String FILE = "metrics.jsonl";

    private final Path file;
    private final FileChannel writer;          // null without --out
    private long whole;                        // bytes of complete lines

    private MetricsLog(Path file, FileChannel writer) {
        this.file = file;
        this.writer = writer;
    }

    /** A log in {@code dir} (started afresh), or one that writes nothing. */
    static MetricsLog open(Optional<Path> dir) {
        if (dir.isEmpty()) {
            return new MetricsLog(null, null);
        }
        Path f = dir.get().resolve(FILE);
        try {
            return new MetricsLog(f, FileChannel.open(f, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + f + ": " + e.getMessage(), e);
        }
    }

    Optional<Path> file() {
        return Optional.ofNullable(file);
    }

    /** Appends step {@code r}: keys as summary.json spells them, memory at the step's peak by category. */
    void step(StepResult r) {
        if (writer == null) {
            return;
        }
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", r.step());
        line.put("loss", r.loss());
        if (r.evaluated()) {
            line.put("val_loss", r.valLoss());      // only on the steps --eval-every measured it after
        }
        line.put("grad_norm", r.gradNorm());
        line.put("lr", r.lr());
        line.put("time_ms", r.timeMs());
        line.put("tokens_per_second", r.tokensPerSecond());
        line.put("peak_bytes", r.peakBytes());
        line.put("live_bytes", r.liveBytes());
        Map<String, Long> split = new LinkedHashMap<>();
        r.peakSplit().forEach((c, b) -> split.put(c.label(), b));
        line.put("bytes_at_peak_by_category", split);
        line.put("comm_bytes", r.commBytes());
        line.put("skipped", r.skipped());
        ByteBuffer bytes = ByteBuffer.wrap((JsonFiles.toJsonLine(line) + "\n").getBytes(StandardCharsets.UTF_8));
        try {
            while (bytes.hasRemaining()) {
                writer.write(bytes, whole + bytes.position());
            }
            whole += bytes.limit();
        } catch (IOException e) {
            try {
                writer.truncate(whole);         // the part of the line that went: a torn line would not parse
            } catch (IOException stillBroken) {
                e.addSuppressed(stillBroken);
            }
            throw new UncheckedIOException("cannot write " + file + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void close() {
        if (writer != null) {
            try {
                writer.close();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write " + file + ": " + e.getMessage(), e);
            }
        }
    }
}
