// Writes safetensors files for the tests, well-formed or with one thing wrong: the header as JSON
// text the test may edit, then the body. Only what the tests need; the reference script writes the
// real checkpoints (tools/reference/reference_common.py).
package org.fsdp4j.weights;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.DType;

final class SafetensorsWriter {

    /** One tensor to write: its dtype, shape and values (rounded to the dtype). */
    record Tensor(SafetensorsFile.Dtype dtype, long[] shape, float[] values) {
    }

    private final Map<String, Tensor> tensors = new LinkedHashMap<>();

    SafetensorsWriter add(String name, SafetensorsFile.Dtype dtype, float[] values, long... shape) {
        tensors.put(name, new Tensor(dtype, shape, values));
        return this;
    }

    /** The file as written, with the header text passed through {@code editHeader} and the body cut to {@code bodyBytes} (-1: whole). */
    void write(Path path, UnaryOperator<String> editHeader, long bodyBytes) throws IOException {
        StringBuilder header = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
        ByteBuffer body = ByteBuffer.allocate(bodyBytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
            Tensor t = e.getValue();
            long begin = body.position();
            for (float v : t.values) {
                switch (t.dtype) {
                    case F32 -> body.putFloat(v);
                    case F16 -> body.putShort(DType.floatToHalf(v));
                    case BF16 -> body.putShort(DType.floatToBf16(v));
                }
            }
            header.append(",\"").append(e.getKey()).append("\":{\"dtype\":\"").append(t.dtype).append("\",\"shape\":")
                    .append(java.util.Arrays.toString(t.shape).replace(" ", "")).append(",\"data_offsets\":[")
                    .append(begin).append(',').append(body.position()).append("]}");
        }
        byte[] h = editHeader.apply(header.append('}').toString()).getBytes(StandardCharsets.UTF_8);
        int padded = (h.length + 7) / 8 * 8;
        ByteBuffer out = ByteBuffer.allocate(8 + padded + body.capacity()).order(ByteOrder.LITTLE_ENDIAN);
        out.putLong(padded).put(h);
        while (out.position() < 8 + padded) {
            out.put((byte) ' ');
        }
        out.put(body.array());
        byte[] bytes = out.array();
        int keep = bodyBytes < 0 ? bytes.length : Math.toIntExact(8 + padded + bodyBytes);
        Files.write(path, java.util.Arrays.copyOf(bytes, keep));
    }

    void write(Path path) throws IOException {
        write(path, UnaryOperator.identity(), -1);
    }

    int bodyBytes() {
        int n = 0;
        for (Tensor t : tensors.values()) {
            n += t.values.length * t.dtype.byteSize;
        }
        return n;
    }
}
