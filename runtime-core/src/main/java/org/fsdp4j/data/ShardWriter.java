// Writes a stream of tokens as numbered shards in llm.c's layout (PREFIX_000000.bin, ...), each
// holding at most a bounded number of tokens, so no shard reaches the 2 GiB a reader maps whole.
// The header's count is written when a shard is full or the writer closes; a shard is written
// under a temporary name and renamed then, so a folder never holds a half-written shard.
package org.fsdp4j.data;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

public final class ShardWriter implements AutoCloseable {

    private final Path dir;
    private final String prefix;
    private final int vocabSize;
    private final int width;                // bytes per token: 2 or 4
    private final long shardTokens;
    private final List<Path> written = new ArrayList<>();
    private final ByteBuffer buf;           // [64 Ki tokens * width], little-endian, the pending bytes
    private OutputStream out;               // the open shard's temporary file, or null
    private Path tmp;
    private long inShard;
    private long total;

    /**
     * A writer of {@code dir}/{@code prefix}_NNNNNN.bin shards of at most {@code shardTokens} tokens
     * of a vocabulary of {@code vocabSize} (uint16 up to 65,536 tokens, uint32 above).
     */
    public ShardWriter(Path dir, String prefix, int vocabSize, long shardTokens) {
        this.dir = dir;
        this.prefix = prefix;
        this.vocabSize = vocabSize;
        this.width = TokenShard.tokenBytes(vocabSize);
        long max = TokenShard.maxTokens(width);
        if (shardTokens < 1 || shardTokens > max) {
            throw new IllegalArgumentException("shard size " + shardTokens + " tokens is out of range: give 1 to " + max
                    + " tokens (" + width + "-byte tokens, a shard is mapped whole and so is at most 2 GiB)");
        }
        this.shardTokens = shardTokens;
        this.buf = ByteBuffer.allocate(65536 * width).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The name of shard {@code index} of {@code prefix}: train_000000.bin. */
    public static String shardName(String prefix, int index) {
        return String.format("%s_%06d.bin", prefix, index);
    }

    /** Appends {@code tokens[off, off + len)}, opening new shards as they fill. */
    public void write(int[] tokens, int off, int len) {
        try {
            for (int i = off; i < off + len; i++) {
                int t = tokens[i];
                if (t < 0 || t >= vocabSize) {
                    throw new IllegalArgumentException("token " + t + " is beyond the vocabulary of " + vocabSize
                            + " tokens: the tokenizer gave an id its vocabulary does not have");
                }
                if (out == null) {
                    tmp = dir.resolve(shardName(prefix, written.size()) + ".tmp");
                    out = new BufferedOutputStream(Files.newOutputStream(tmp), 1 << 20);
                    out.write(TokenShard.header(width, 0).array());
                    inShard = 0;
                }
                if (width == 2) {
                    buf.putShort((short) t);
                } else {
                    buf.putInt(t);
                }
                if (!buf.hasRemaining()) {
                    flushBuffer();
                }
                inShard++;
                total++;
                if (inShard == shardTokens) {
                    finishShard();
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write token shard " + tmp + ": " + e.getMessage(), e);
        }
    }

    public void write(int[] tokens) {
        write(tokens, 0, tokens.length);
    }

    private void flushBuffer() throws IOException {
        out.write(buf.array(), 0, buf.position());
        buf.clear();
    }

    private void finishShard() throws IOException {
        flushBuffer();
        out.close();
        out = null;
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
            ch.write(TokenShard.header(width, inShard), 0);     // the count, now known
        }
        Path target = dir.resolve(shardName(prefix, written.size()));
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        written.add(target);
    }

    /** Shards written so far (the last one only once the writer closes). */
    public List<Path> shards() {
        return List.copyOf(written);
    }

    /** Tokens written so far. */
    public long tokens() {
        return total;
    }

    /** Bytes per token in these shards. */
    public int tokenBytes() {
        return width;
    }

    /**
     * Removes what this writer wrote (its finished shards and the open one), after a failure, so
     * that a folder never holds the shards of half a run and the command can be run again.
     */
    public void abort() {
        try {
            if (out != null) {
                out.close();
                out = null;
            }
            if (tmp != null) {
                Files.deleteIfExists(tmp);
            }
            for (Path p : written) {
                Files.deleteIfExists(p);
            }
            written.clear();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove the partial token shards in " + dir + ": " + e.getMessage(), e);
        }
    }

    /** Writes the last, partly filled shard. */
    @Override
    public void close() {
        if (out != null) {
            try {
                finishShard();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write token shard " + tmp + ": " + e.getMessage(), e);
            }
        }
    }
}
