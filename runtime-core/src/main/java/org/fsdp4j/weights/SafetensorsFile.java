// A reader of one safetensors file (Hugging Face's format: https://huggingface.co/docs/safetensors),
// self-contained so that any code that needs checkpoint tensors (pretrained weights here, the
// checkpoint exporter's round-trip tests) can share it:
//
//   bytes 0..8        N, an unsigned 64-bit little-endian integer: the header's length
//   bytes 8..8+N      UTF-8 JSON object: for each tensor name {"dtype", "shape": [...],
//                     "data_offsets": [begin, end]}, plus an optional "__metadata__" object of strings
//   bytes 8+N..       the body: each tensor's elements, row-major, little-endian, at [begin, end) of it
//
// Everything is checked when the file is opened, so a bad file is refused before anything is read
// from it, with one line that names the file and the tensor: a header that is not such an object, a
// dtype safetensors does not define, a shape or offsets of the wrong form, offsets whose length is
// not the shape's bytes, tensors that overlap, and a body shorter than its tensors (a truncated
// download). fsdp4j reads F32, F16 and BF16 tensors; a file may hold others (a checkpoint's integer
// or boolean buffers), and reading one of those is refused naming it. Reads are positional, so
// several threads may read one file at once.
package org.fsdp4j.weights;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.api.DType;

public final class SafetensorsFile implements AutoCloseable {

    /** A header this long is not a tensor index but a wrong or corrupt file. */
    static final long MAX_HEADER_BYTES = 100L << 20;
    /** Elements converted per read: bounds the staging buffer. */
    private static final int CHUNK_ELEMENTS = 1 << 16;

    /** The element types safetensors defines, by their names; fsdp4j reads the floating ones F32, F16 and BF16. */
    public enum Dtype {
        F32(4), F16(2), BF16(2), F64(8), F8_E4M3(1), F8_E5M2(1),
        I64(8), I32(4), I16(2), I8(1), U64(8), U32(4), U16(2), U8(1), BOOL(1);

        final int byteSize;

        Dtype(int byteSize) {
            this.byteSize = byteSize;
        }

        /** Whether fsdp4j reads it (into fp32). */
        public boolean readable() {
            return this == F32 || this == F16 || this == BF16;
        }

        /** The safetensors dtype of fsdp4j's float {@code d}. */
        public static Dtype of(DType d) {
            switch (d) {
                case F32: return F32;
                case F16: return F16;
                case BF16: return BF16;
                default: throw new IllegalArgumentException("safetensors has no float dtype for " + d);
            }
        }
    }

    /** One tensor of the file: its dtype, shape, and where its bytes lie in the body. */
    public record Entry(String name, Dtype dtype, long[] shape, long begin, long end) {

        public long numel() {
            long n = 1;
            for (long d : shape) {
                n *= d;
            }
            return n;
        }

        @Override
        public long[] shape() {
            return shape.clone();
        }
    }

    private final Path path;
    private final FileChannel channel;
    private final long bodyStart;                                 // 8 + N
    private final Map<String, Entry> entries;                     // in header order
    private final Map<String, String> metadata;

    private SafetensorsFile(Path path, FileChannel channel) throws IOException {
        this.path = path;
        this.channel = channel;
        long fileBytes = channel.size();
        if (fileBytes < 8) {
            throw refused("is " + fileBytes + " bytes long, shorter than the 8-byte header length");
        }
        ByteBuffer lengthBytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        readFully(lengthBytes, 0);
        long headerBytes = lengthBytes.getLong(0);
        if (headerBytes < 2 || headerBytes > MAX_HEADER_BYTES || headerBytes > fileBytes - 8) {
            throw refused("has a header length of " + Long.toUnsignedString(headerBytes) + " bytes, which "
                    + (headerBytes > fileBytes - 8 && headerBytes >= 2 && headerBytes <= MAX_HEADER_BYTES
                    ? "runs past the end of the file (" + fileBytes + " bytes): truncated?" : "no safetensors file has"));
        }
        this.bodyStart = 8 + headerBytes;
        ByteBuffer headerBuffer = ByteBuffer.allocate((int) headerBytes);
        readFully(headerBuffer, 8);
        JsonNode header;
        try {
            header = new ObjectMapper().enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
                    .readTree(new String(headerBuffer.array(), StandardCharsets.UTF_8));
        } catch (JsonProcessingException e) {
            throw refused("has a header that is not JSON (" + e.getOriginalMessage() + ")");
        }
        if (header == null || !header.isObject()) {
            throw refused("has a header that is not a JSON object");
        }
        Map<String, String> meta = new LinkedHashMap<>();
        Map<String, Entry> parsed = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> f = it.next();
            if (f.getKey().equals("__metadata__")) {
                parseMetadata(f.getValue(), meta);
            } else {
                parsed.put(f.getKey(), parseEntry(f.getKey(), f.getValue()));
            }
        }
        checkLayout(parsed.values(), fileBytes - bodyStart);
        this.entries = Collections.unmodifiableMap(parsed);
        this.metadata = Collections.unmodifiableMap(meta);
    }

    /** Opens and checks {@code path}; a file that is not a well-formed safetensors file is an IllegalArgumentException. */
    public static SafetensorsFile open(Path path) {
        FileChannel channel;
        try {
            channel = FileChannel.open(path, StandardOpenOption.READ);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read the weights file " + path + ": " + e.getMessage(), e);
        }
        try {
            return new SafetensorsFile(path, channel);
        } catch (IOException e) {
            closeQuietly(channel);
            throw new UncheckedIOException("cannot read the weights file " + path, e);
        } catch (RuntimeException e) {
            closeQuietly(channel);
            throw e;
        }
    }

    public Path path() {
        return path;
    }

    /** Every tensor, in the header's order. */
    public List<Entry> entries() {
        return List.copyOf(entries.values());
    }

    /** The tensor called {@code name}, or null. */
    public Entry entry(String name) {
        return entries.get(name);
    }

    /** The header's "__metadata__" (string to string; empty when there is none). */
    public Map<String, String> metadata() {
        return metadata;
    }

    /**
     * Elements [firstElement, firstElement + count) of tensor {@code name} (row-major), widened to
     * fp32, into out[outOffset ..].
     */
    public void read(String name, long firstElement, float[] out, int outOffset, int count) {
        Entry e = entries.get(name);
        if (e == null) {
            throw new IllegalArgumentException(path + " has no tensor " + name);
        }
        requireReadable(e);
        if (firstElement < 0 || count < 0 || firstElement + count > e.numel() || outOffset < 0
                || outOffset + count > out.length) {
            throw new IllegalArgumentException("elements [" + firstElement + ", " + (firstElement + count) + ") of "
                    + name + Arrays.toString(e.shape) + " into " + out.length + " floats at " + outOffset
                    + " are out of range");
        }
        int size = e.dtype.byteSize;
        ByteBuffer buf = ByteBuffer.allocate(Math.min(count, CHUNK_ELEMENTS) * size).order(ByteOrder.LITTLE_ENDIAN);
        for (int done = 0; done < count; ) {
            int n = Math.min(count - done, CHUNK_ELEMENTS);
            buf.clear().limit(n * size);
            readFully(buf, bodyStart + e.begin + (firstElement + done) * size);
            for (int i = 0; i < n; i++) {
                out[outOffset + done + i] = switch (e.dtype) {
                    case F32 -> buf.getFloat(i * 4);
                    case F16 -> DType.halfToFloat(buf.getShort(i * 2));
                    case BF16 -> DType.bf16ToFloat(buf.getShort(i * 2));
                    default -> throw new AssertionError(e.dtype);   // requireReadable
                };
            }
            done += n;
        }
    }

    /** Throws, naming the tensor, unless fsdp4j reads its dtype. */
    public void requireReadable(Entry e) {
        if (!e.dtype.readable()) {
            throw new IllegalArgumentException(path + ": tensor " + e.name + " has dtype " + e.dtype
                    + "; fsdp4j reads F32, F16 and BF16");
        }
    }

    /** Closes the file; idempotent. */
    @Override
    public void close() {
        closeQuietly(channel);
    }

    @Override
    public String toString() {
        return path + " (" + entries.size() + " tensors)";
    }

    // ------------------------------------------------------------------ checks

    private Entry parseEntry(String name, JsonNode v) {
        if (!v.isObject()) {
            throw refused("tensor " + name + ": its header entry is not an object");
        }
        JsonNode dtype = v.get("dtype");
        JsonNode shape = v.get("shape");
        JsonNode offsets = v.get("data_offsets");
        if (dtype == null || !dtype.isTextual() || shape == null || !shape.isArray() || offsets == null
                || !offsets.isArray() || offsets.size() != 2) {
            throw refused("tensor " + name + ": its header entry needs dtype, shape and data_offsets [begin, end]");
        }
        Dtype d;
        try {
            d = Dtype.valueOf(dtype.asText());
        } catch (IllegalArgumentException e) {
            throw refused("tensor " + name + " has dtype " + dtype.asText() + ", which safetensors does not define");
        }
        long[] dims = new long[shape.size()];
        long numel = 1;
        for (int i = 0; i < dims.length; i++) {
            JsonNode dim = shape.get(i);
            if (!dim.canConvertToLong() || !dim.isIntegralNumber() || dim.asLong() < 0) {
                throw refused("tensor " + name + " has shape " + shape + ", not a list of sizes");
            }
            dims[i] = dim.asLong();
            numel = multiplyOrRefuse(name, shape, numel, dims[i]);
        }
        for (JsonNode o : offsets) {
            if (!o.isIntegralNumber() || !o.canConvertToLong() || o.asLong() < 0) {
                throw refused("tensor " + name + " has data_offsets " + offsets + ", not two byte offsets");
            }
        }
        long begin = offsets.get(0).asLong();
        long end = offsets.get(1).asLong();
        long bytes = multiplyOrRefuse(name, shape, numel, d.byteSize);
        if (end - begin != bytes) {
            throw refused("tensor " + name + " (" + d + " " + Arrays.toString(dims) + ", " + bytes + " bytes) has"
                    + " data_offsets [" + begin + ", " + end + "), " + (end - begin) + " bytes");
        }
        return new Entry(name, d, dims, begin, end);
    }

    /** a * b, or the file's refusal: a shape whose size overflows a long is a malformed header, not an ArithmeticException. */
    private long multiplyOrRefuse(String name, JsonNode shape, long a, long b) {
        try {
            return Math.multiplyExact(a, b);
        } catch (ArithmeticException e) {
            throw refused("tensor " + name + " has shape " + shape + ", more bytes than a file can hold");
        }
    }

    private void parseMetadata(JsonNode v, Map<String, String> out) {
        if (!v.isObject()) {
            throw refused("has a __metadata__ that is not an object");
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = v.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> m = it.next();
            if (!m.getValue().isTextual()) {
                throw refused("has a __metadata__ entry " + m.getKey() + " that is not a string");
            }
            out.put(m.getKey(), m.getValue().asText());
        }
    }

    /** No two tensors share a byte, and every tensor's bytes lie within the body. */
    private void checkLayout(Iterable<Entry> all, long bodyBytes) {
        List<Entry> byBegin = new ArrayList<>();
        all.forEach(byBegin::add);
        byBegin.sort(Comparator.comparingLong(Entry::begin).thenComparingLong(Entry::end));
        Entry previous = null;
        for (Entry e : byBegin) {
            if (previous != null && e.begin < previous.end && e.end > e.begin) {
                throw refused("tensor " + e.name + " (bytes [" + e.begin + ", " + e.end + ")) overlaps tensor "
                        + previous.name + " (bytes [" + previous.begin + ", " + previous.end + "))");
            }
            previous = e.end > e.begin ? e : previous;
        }
        for (Entry e : byBegin) {
            if (e.end > bodyBytes) {
                throw refused("is truncated: tensor " + e.name + " needs bytes [" + e.begin + ", " + e.end
                        + ") of the body, which holds " + bodyBytes);
            }
        }
    }

    private IllegalArgumentException refused(String problem) {
        return new IllegalArgumentException("the weights file " + path + " " + problem);
    }

    private void readFully(ByteBuffer buf, long position) {
        try {
            long at = position;
            while (buf.hasRemaining()) {
                int n = channel.read(buf, at);
                if (n < 0) {
                    throw refused("ended at byte " + at + " while reading it (changed on disk?)");
                }
                at += n;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the weights file " + path, e);
        }
    }

    private static void closeQuietly(FileChannel c) {
        try {
            c.close();
        } catch (IOException ignored) {
            // closing a read-only channel loses nothing
        }
    }
}
