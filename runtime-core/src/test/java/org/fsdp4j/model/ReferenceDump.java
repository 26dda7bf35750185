// Loads a PyTorch reference dump that tools/reference/gpt_reference.py or llama_reference.py
// writes (the parity tests' ground truth: gpt_tiny.bin, gpt_tiny_large.bin, llama_tiny.bin,
// llama_tiny_large.bin, and their bf16 autocast counterparts *_bf16.bin), so the tests read
// tensors by name instead of by byte offset.
//
// File format (little-endian), version 1:
//   bytes 0..7     magic "FSDP4JRF"
//   bytes 8..11    uint32 format version (1)
//   bytes 12..15   uint32 H, the byte length of the header
//   bytes 16..16+H UTF-8 JSON header: seed, init (how the weights were drawn), config
//                  {vocabSize, maxSeqLen, numLayers, numHeads, embedDim; a Llama's also numKvHeads,
//                  hiddenDim, ropeTheta, normEps}, batch {batchSize,
//                  seqLen}, adamw {lr, beta1, beta2, eps, weightDecay, steps} (fp32 dumps),
//                  params (names in PyTorch's module order), torchFp32Error (fp32 dumps: how far
//                  fp32 PyTorch lands from the float64 reference) or paramDtype, numerics and
//                  torchBf16Error (bf16 dumps: how far bf16 autocast lands from float64),
//                  tensors [{name, dtype f32|i32, shape, offset, numBytes}]
//   then the payload: each tensor's row-major elements at `offset` bytes from the payload start.
// Tensor names: tokens, targets (B, T) i32; logits (B, T, V); loss (); param.<name> (initial
// weights); grad.<name> (gradient of the first loss); step1.<name> (weights after one AdamW
// step) and stepLosses (steps), fp32 dumps only — see the script for how each was computed.
package org.fsdp4j.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public final class ReferenceDump {

    private static final byte[] MAGIC = "FSDP4JRF".getBytes(StandardCharsets.US_ASCII);
    private static final int FORMAT_VERSION = 1;
    private static final String REGENERATE = "regenerate it with tools/reference/gpt_reference.py or llama_reference.py";

    private record Entry(String dtype, long[] shape, int offset, int numBytes) {
    }

    private final String resource;
    private final JsonNode header;
    private final ByteBuffer payload;
    private final Map<String, Entry> entries = new HashMap<>();

    private ReferenceDump(String resource, byte[] bytes) throws IOException {
        this.resource = resource;
        ByteBuffer buf = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        if (bytes.length < 16 || !Arrays.equals(Arrays.copyOf(bytes, MAGIC.length), MAGIC)) {
            throw new IllegalStateException(resource + " is not an fsdp4j reference dump (bad magic); " + REGENERATE);
        }
        int version = buf.getInt(8);
        if (version != FORMAT_VERSION) {
            throw new IllegalStateException(resource + " has format version " + version + ", this loader reads "
                    + FORMAT_VERSION + "; " + REGENERATE);
        }
        int headerBytes = buf.getInt(12);
        header = new ObjectMapper().readTree(new String(bytes, 16, headerBytes, StandardCharsets.UTF_8));
        payload = buf.position(16 + headerBytes).slice().order(ByteOrder.LITTLE_ENDIAN);
        for (JsonNode t : header.get("tensors")) {
            long[] shape = new long[t.get("shape").size()];
            for (int i = 0; i < shape.length; i++) {
                shape[i] = t.get("shape").get(i).asLong();
            }
            Entry e = new Entry(t.get("dtype").asText(), shape, t.get("offset").asInt(), t.get("numBytes").asInt());
            if ((long) e.offset + e.numBytes > payload.capacity()) {
                throw new IllegalStateException(resource + ": tensor " + t.get("name").asText()
                        + " runs past the end of the file (truncated?); " + REGENERATE);
            }
            entries.put(t.get("name").asText(), e);
        }
    }

    /** Reads a dump from the test classpath, e.g. "/reference/gpt_tiny.bin". */
    public static ReferenceDump load(String resource) {
        try (InputStream in = ReferenceDump.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("test resource " + resource + " is missing; " + REGENERATE);
            }
            return new ReferenceDump(resource, in.readAllBytes());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + resource, e);
        }
    }

    /** The model configuration the dump was made with: a Llama's has numKvHeads, a GPT's does not. */
    public ModelConfig config() {
        JsonNode c = header.get("config");
        if (c.has("numKvHeads")) {
            return new LlamaConfig(c.get("vocabSize").asInt(), c.get("maxSeqLen").asInt(), c.get("numLayers").asInt(),
                    c.get("numHeads").asInt(), c.get("numKvHeads").asInt(), c.get("embedDim").asInt(),
                    c.get("hiddenDim").asInt(), c.get("ropeTheta").asDouble(), c.get("normEps").asDouble());
        }
        return new GptConfig(c.get("vocabSize").asInt(), c.get("maxSeqLen").asInt(), c.get("numLayers").asInt(),
                c.get("numHeads").asInt(), c.get("embedDim").asInt());
    }

    public int batchSize() {
        return header.get("batch").get("batchSize").asInt();
    }

    public int seqLen() {
        return header.get("batch").get("seqLen").asInt();
    }

    /** An AdamW hyperparameter: lr, beta1, beta2, eps, weightDecay or steps. */
    public double adamw(String key) {
        return required(header.get("adamw"), key).asDouble();
    }

    /**
     * A number from a header object, e.g. ("torchFp32Error", "gradMaxAbs"): how far fp32 PyTorch lands
     * from the float64 reference (fp32 dumps), or torchBf16Error, how far bf16 autocast does (bf16 dumps).
     */
    public double headerNumber(String object, String key) {
        return required(required(header, object), key).asDouble();
    }

    /** Parameter names in PyTorch's module order (root and block parameters interleave differently in fsdp4j). */
    public List<String> paramNames() {
        List<String> names = new ArrayList<>();
        header.get("params").forEach(n -> names.add(n.asText()));
        return names;
    }

    public long[] shape(String name) {
        return entry(name).shape.clone();
    }

    public float[] floats(String name) {
        Entry e = typed(name, "f32");
        float[] out = new float[e.numBytes / Float.BYTES];
        payload.slice(e.offset, e.numBytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out);
        return out;
    }

    public int[] ints(String name) {
        Entry e = typed(name, "i32");
        int[] out = new int[e.numBytes / Integer.BYTES];
        payload.slice(e.offset, e.numBytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(out);
        return out;
    }

    private Entry typed(String name, String dtype) {
        Entry e = entry(name);
        if (!e.dtype.equals(dtype)) {
            throw new IllegalArgumentException(resource + ": tensor " + name + " is " + e.dtype + ", not " + dtype);
        }
        return e;
    }

    private Entry entry(String name) {
        Entry e = entries.get(name);
        if (e == null) {
            throw new IllegalArgumentException(resource + " has no tensor " + name + "; it has " + entries.keySet());
        }
        return e;
    }

    private JsonNode required(JsonNode node, String key) {
        JsonNode v = node.get(key);
        if (v == null) {
            throw new IllegalArgumentException(resource + " header has no " + key + " in " + node);
        }
        return v;
    }
}
