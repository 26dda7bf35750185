// The safetensors reader: the reference script's files read back exactly (F32, and BF16 as the bf16
// rounding of the same weights), F16, element ranges, and every malformed file refused on open with
// one line that names the problem (and the tensor, where one is at fault).
package org.fsdp4j.weights;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.Random;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.DType;
import org.fsdp4j.model.ReferenceDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsFileTest {

    @TempDir
    Path dir;

    static Path resource(String name) {
        try {
            return Path.of(SafetensorsFileTest.class.getResource("/reference/" + name).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void readsTheReferenceScriptsFilesExactly() {
        ReferenceDump ref = ReferenceDump.load("/reference/llama_tiny_large.bin");
        try (SafetensorsFile f32 = SafetensorsFile.open(resource("llama_tiny_large.safetensors"));
             SafetensorsFile bf16 = SafetensorsFile.open(resource("llama_tiny_large_bf16.safetensors"))) {
            assertEquals(ref.paramNames().size(), f32.entries().size());
            assertEquals("pt", f32.metadata().get("format"));
            for (String name : ref.paramNames()) {
                float[] want = ref.floats("param." + name);
                assertArrayEquals(ref.shape("param." + name), f32.entry(name).shape(), name);
                assertEquals(SafetensorsFile.Dtype.F32, f32.entry(name).dtype());
                assertEquals(SafetensorsFile.Dtype.BF16, bf16.entry(name).dtype());
                float[] got = new float[want.length];
                f32.read(name, 0, got, 0, got.length);
                assertArrayEquals(want, got, name);
                bf16.read(name, 0, got, 0, got.length);
                for (int i = 0; i < want.length; i++) {
                    assertEquals(DType.BF16.round(want[i]), got[i], name + "[" + i + "]");
                }
                // an element range, as a shard asks for one
                int first = want.length / 3;
                int count = want.length / 2;
                float[] part = new float[count + 2];
                f32.read(name, first, part, 2, count);
                for (int i = 0; i < count; i++) {
                    assertEquals(want[first + i], part[2 + i], name + " range");
                }
            }
        }
    }

    @Test
    void readsF16AndEmptyTensors() throws IOException {
        Random r = new Random(7);
        float[] v = new float[70_000];   // more than one read chunk
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) r.nextGaussian();
        }
        Path p = dir.resolve("half.safetensors");
        new SafetensorsWriter().add("a", SafetensorsFile.Dtype.F16, v, 700, 100)
                .add("empty", SafetensorsFile.Dtype.F32, new float[0], 0, 3).write(p);
        try (SafetensorsFile f = SafetensorsFile.open(p)) {
            float[] got = new float[v.length];
            f.read("a", 0, got, 0, v.length);
            for (int i = 0; i < v.length; i++) {
                assertEquals(DType.F16.round(v[i]), got[i]);
            }
            assertEquals(0, f.entry("empty").numel());
        }
    }

    @Test
    void malformedFilesAreRefusedWithOneLineNamingTheProblem() throws IOException {
        SafetensorsWriter w = new SafetensorsWriter()
                .add("model.norm.weight", SafetensorsFile.Dtype.F32, new float[8], 8)
                .add("lm_head.weight", SafetensorsFile.Dtype.BF16, new float[12], 3, 4);
        assertRefused(w, s -> s.replace("\"BF16\"", "\"F4\""), -1, "tensor lm_head.weight has dtype F4, which safetensors does not define");
        assertRefused(w, s -> s.replace("\"BF16\"", "\"I64\""), -1, "tensor lm_head.weight (I64 [3, 4], 96 bytes) has data_offsets [32, 56), 24 bytes");
        assertRefused(w, s -> s.replace("[3,4]", "[4,4]"), -1, "tensor lm_head.weight (BF16 [4, 4], 32 bytes)");
        assertRefused(w, s -> s.replace("[32,56]", "[16,40]"), -1, "tensor lm_head.weight (bytes [16, 40)) overlaps tensor model.norm.weight");
        assertRefused(w, UnaryOperator.identity(), 40, "is truncated: tensor lm_head.weight needs bytes [32, 56) of the body, which holds 40");
        assertRefused(w, s -> s.replace("{\"__metadata__\"", "[{\"__metadata__\"") + "]", -1, "header that is not a JSON object");
        assertRefused(w, s -> s.substring(0, s.length() - 5), -1, "header that is not JSON");
        assertRefused(w, s -> s.replace("\"lm_head.weight\"", "\"model.norm.weight\""), -1, "header that is not JSON");
        assertRefused(w, s -> s.replace("[3,4]", "[3,-4]"), -1, "tensor lm_head.weight has shape [3,-4]");

        Path tiny = dir.resolve("tiny.safetensors");
        java.nio.file.Files.write(tiny, new byte[] {1, 2, 3});
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> SafetensorsFile.open(tiny)),
                "shorter than the 8-byte header length");
        Path huge = dir.resolve("huge.safetensors");
        java.nio.file.Files.write(huge, new byte[] {(byte) 0xff, 0, 0, 0, 0, 0, 0, 0x7f, '{', '}'});
        assertOneLine(assertThrows(IllegalArgumentException.class, () -> SafetensorsFile.open(huge)), "header length of");
    }

    @Test
    void tensorsOfOtherDtypesOpenButAreNotRead() throws IOException {
        Path p = dir.resolve("ints.safetensors");
        new SafetensorsWriter().add("w", SafetensorsFile.Dtype.BF16, new float[] {1, 2}, 2)
                .write(p, s -> s.replace("\"BF16\"", "\"I16\""), -1);
        try (SafetensorsFile f = SafetensorsFile.open(p)) {
            assertEquals(SafetensorsFile.Dtype.I16, f.entry("w").dtype());
            assertOneLine(assertThrows(IllegalArgumentException.class, () -> f.read("w", 0, new float[2], 0, 2)),
                    "tensor w has dtype I16; fsdp4j reads F32, F16 and BF16");
        }
    }

    private void assertRefused(SafetensorsWriter w, UnaryOperator<String> edit, long bodyBytes, String expected)
            throws IOException {
        Path p = dir.resolve("bad.safetensors");
        w.write(p, edit, bodyBytes);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SafetensorsFile.open(p));
        assertOneLine(e, expected);
        assertTrue(e.getMessage().contains(p.toString()), e.getMessage());
    }

    static void assertOneLine(Exception e, String expected) {
        assertTrue(e.getMessage().contains(expected), "expected '" + expected + "' in: " + e.getMessage());
        assertFalse(e.getMessage().contains("\n"), "more than one line: " + e.getMessage());
    }
}
