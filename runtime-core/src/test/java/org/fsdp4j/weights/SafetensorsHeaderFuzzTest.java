// Fuzzes safetensors headers (issue 47, item 3): --init-from and export round trips open files
// downloaded from anywhere, and the header is JSON behind an 8-byte length. Random and mutated
// files (the length set to huge, negative or past the file; JSON keys removed, renamed,
// duplicated; wrong types; huge, negative or overflowing shapes and offsets; bit flips,
// truncation) must each open or be refused with SafetensorsFile's one error, an
// IllegalArgumentException naming the file; never another exception or an allocation of the
// claimed header. A file that opens must serve every F32/F16/BF16 tensor it lists.
package org.fsdp4j.weights;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.fsdp4j.testing.Fuzz;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsHeaderFuzzTest {

    private static final long SEED = 0x5AFE7L;
    private static final String HEADER = "{\"__metadata__\":{\"format\":\"pt\"},"
            + "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            + "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
            + "\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[32,40]},"
            + "\"e\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[40,40]}}";

    @TempDir
    Path dir;

    private static byte[] file(byte[] header, int bodyBytes) {
        ByteBuffer b = ByteBuffer.allocate(8 + header.length + bodyBytes).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(header.length).put(header);
        return b.array();
    }

    private static void openAndRead(Path p) {
        try (SafetensorsFile f = SafetensorsFile.open(p)) {
            for (SafetensorsFile.Entry e : f.entries()) {
                if (e.dtype().readable()) {
                    float[] out = new float[(int) Math.min(e.numel(), 64)];
                    f.read(e.name(), 0, out, 0, out.length);
                }
            }
        }
    }

    @Test
    void filesOpenOrAreRefusedCleanly() throws Exception {
        Path p = dir.resolve("model.safetensors");
        byte[] valid = file(HEADER.getBytes(StandardCharsets.UTF_8), 40);
        Files.write(p, valid);
        openAndRead(p);                                        // the fuzzer's starting point is valid
        Fuzz f = new Fuzz(SEED);
        int ran = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> f.run(5_000, 1_000, 4_000, n -> {
            switch (n % 4) {
                case 0:
                    return new Fuzz.Input(n, "random", f.randomBytes(n % 8 == 0 ? 16 : 300));
                case 1:
                    return f.mutate(n, valid, new int[] {0, 4}, ByteOrder.LITTLE_ENDIAN);
                default:
                    Fuzz.Input h = f.mutateJson(n, HEADER);
                    return new Fuzz.Input(n, "header " + h.how(), file(h.bytes(), f.random().nextInt(48)));
            }
        }, IllegalArgumentException.class, in -> {
            Files.write(p, in.bytes());
            openAndRead(p);
        }), "seed " + SEED);
        assertTrue(ran >= 1_000, "seed " + SEED + ": only " + ran + " inputs");
    }

    /** A header length of 2^63-1, 2^32 or 2 GB in a short file is refused from the 8 bytes, before any allocation. */
    @Test
    void hugeHeaderLengthsAreRefusedBeforeAllocating() throws Exception {
        Path p = dir.resolve("huge.safetensors");
        for (long claim : new long[] {Long.MAX_VALUE, -1, 1L << 32, Integer.MAX_VALUE, 2L << 30, SafetensorsFile.MAX_HEADER_BYTES + 1}) {
            byte[] b = file("{}".getBytes(StandardCharsets.UTF_8), 0);
            ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(0, claim);
            Files.write(p, b);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> openAndRead(p), "claim " + claim);
            assertTrue(e.getMessage().contains("header length"), e.getMessage());
        }
    }
}
