// One token shard in llm.c's layout, memory-mapped: a header of 256 little-endian int32 (magic,
// version, token count, the rest zero) then the tokens, uint16 (magic 20240520, version 1: GPT-2's
// 50,257 and any vocabulary up to 65,536) or uint32 (magic 20240801, version 7: llm.c's Llama 3
// layout, for larger vocabularies). The files fsdp4j data tokenize writes and llm.c's own
// preprocessing scripts write read alike. A shard is mapped whole, so one is at most 2 GiB: the
// writer's bound keeps fsdp4j's far below, and a larger one is refused here in one line.
package org.fsdp4j.data;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

public final class TokenShard {

    /** Header ints; the header is HEADER_INTS * 4 bytes. */
    public static final int HEADER_INTS = 256;
    public static final int HEADER_BYTES = HEADER_INTS * Integer.BYTES;
    /** llm.c's GPT-2 layout: uint16 tokens. */
    public static final int MAGIC_U16 = 20240520;
    public static final int VERSION_U16 = 1;
    /** llm.c's Llama 3 layout: uint32 tokens. */
    public static final int MAGIC_U32 = 20240801;
    public static final int VERSION_U32 = 7;
    /** The largest vocabulary uint16 tokens hold. */
    public static final int U16_VOCAB_LIMIT = 1 << 16;
    /** The most bytes one shard may have: it is mapped as one buffer. */
    public static final long MAX_SHARD_BYTES = Integer.MAX_VALUE;

    private final Path file;
    private final MappedByteBuffer map;     // [HEADER_BYTES + count * width], little-endian
    private final int width;                // bytes per token: 2 or 4
    private final long count;

    private TokenShard(Path file, MappedByteBuffer map, int width, long count) {
        this.file = file;
        this.map = map;
        this.width = width;
        this.count = count;
    }

    /** The bytes per token of a vocabulary of {@code vocabSize}: 2 up to 65,536 tokens, else 4. */
    public static int tokenBytes(int vocabSize) {
        return vocabSize <= U16_VOCAB_LIMIT ? 2 : 4;
    }

    /** The most tokens a shard of {@code tokenBytes} per token may hold. */
    public static long maxTokens(int tokenBytes) {
        return (MAX_SHARD_BYTES - HEADER_BYTES) / tokenBytes;
    }

    /** The header of a shard of {@code count} tokens of {@code tokenBytes} each: [256] int32, little-endian. */
    public static ByteBuffer header(int tokenBytes, long count) {
        ByteBuffer h = ByteBuffer.allocate(HEADER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        h.putInt(0, tokenBytes == 2 ? MAGIC_U16 : MAGIC_U32);
        h.putInt(4, tokenBytes == 2 ? VERSION_U16 : VERSION_U32);
        h.putInt(8, Math.toIntExact(count));
        return h;
    }

    /** {@code file}, mapped read-only after its header, magic, version and size are checked. */
    public static TokenShard open(Path file) {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < HEADER_BYTES) {
                throw bad(file, "has " + size + " bytes, less than the " + HEADER_BYTES + "-byte header");
            }
            if (size > MAX_SHARD_BYTES) {
                throw bad(file, "has " + size + " bytes; shards up to 2 GiB are read: write smaller ones"
                        + " (fsdp4j data tokenize --shard-tokens)");
            }
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
            map.order(ByteOrder.LITTLE_ENDIAN);
            int magic = map.getInt(0);
            int version = map.getInt(4);
            long count = Integer.toUnsignedLong(map.getInt(8));
            int width;
            if (magic == MAGIC_U16) {
                width = 2;
                if (version != VERSION_U16) {
                    throw bad(file, "has version " + version + " for magic " + MAGIC_U16 + " (uint16 tokens), not " + VERSION_U16);
                }
            } else if (magic == MAGIC_U32) {
                width = 4;
                if (version != VERSION_U32) {
                    throw bad(file, "has version " + version + " for magic " + MAGIC_U32 + " (uint32 tokens), not " + VERSION_U32);
                }
            } else {
                throw bad(file, "has magic " + magic + ", not " + MAGIC_U16 + " or " + MAGIC_U32);
            }
            long expected = HEADER_BYTES + count * width;
            if (size != expected) {
                throw bad(file, "has " + size + " bytes but its header says " + count + " tokens of " + width
                        + " bytes (" + expected + " bytes): it is truncated or was written with another layout");
            }
            return new TokenShard(file, map, width, count);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read token shard " + file + ": " + e.getMessage(), e);
        }
    }

    private static IllegalArgumentException bad(Path file, String why) {
        return new IllegalArgumentException("token shard " + file + " " + why + ": give files written by fsdp4j data"
                + " tokenize or llm.c's preprocessing");
    }

    public Path file() {
        return file;
    }

    /** Tokens in the shard. */
    public long size() {
        return count;
    }

    /** Bytes per token: 2 (uint16) or 4 (uint32). */
    public int tokenBytes() {
        return width;
    }

    /** Token {@code i} (0 <= i < size()). */
    public int get(long i) {
        int at = Math.toIntExact(HEADER_BYTES + i * width);
        return width == 2 ? Short.toUnsignedInt(map.getShort(at)) : map.getInt(at);
    }

    /** Tokens [from, from + len) into dst[off, off + len). */
    public void read(long from, int[] dst, int off, int len) {
        if (from < 0 || len < 0 || from + len > count) {
            throw new IndexOutOfBoundsException("tokens [" + from + ", " + (from + len) + ") of a shard of " + count);
        }
        int at = Math.toIntExact(HEADER_BYTES + from * width);
        if (width == 2) {
            for (int i = 0; i < len; i++) {
                dst[off + i] = Short.toUnsignedInt(map.getShort(at + 2 * i));
            }
        } else {
            IntBuffer ints = map.slice(at, len * 4).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            ints.get(dst, off, len);
        }
    }
}
