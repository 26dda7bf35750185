// The emulator's fp16/bf16 conversions against DType's, bit for bit (NaN as any NaN: CUDA
// returns a canonical NaN where DType keeps payload bits): rounding of fp32 to fp16 and bf16 at
// every exponent with the mantissas that decide ties, overflow and subnormals, plus a million
// random patterns, and every 16-bit pattern widened back. Run with the headers the emulator
// builds with (CUDA's host code where a toolkit is installed) and always with the fallback
// headers, which a machine without CUDA (CI's) uses; the kernels are also compiled against the
// fallback here, so that path cannot break unseen on a machine that has CUDA.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.fsdp4j.api.DType;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

@Tag("emulator")
class EmulatorConversionsTest {

    private static final Path FALLBACK = EmuToolchain.EMULATOR_DIR.resolve("fallback");
    private static final int[] TIE_MANTISSAS = {0, 1, 2, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff,
        0x8000, 0x8001, 0x17fff, 0x18000, 0x18001, 0x400000, 0x7fe000, 0x7ff000, 0x7fffff};

    @TestFactory
    Stream<DynamicTest> halfAndBf16ConversionsMatchDType() {
        return EmuToolchain.unlessUnavailable(() -> {
            Set<Path> headers = new LinkedHashSet<>(List.of(EmuToolchain.halfHeaders(), FALLBACK));
            long seed = System.nanoTime();
            return headers.stream().map(h -> DynamicTest.dynamicTest("headers " + h, () -> check(h, seed)));
        });
    }

    @Test
    void kernelsCompileAgainstTheFallbackHeaders() {
        EmuToolchain.unavailable().ifPresent(reason -> assumeTrue(false, reason));
        assumeTrue(!EmuToolchain.halfHeaders().equals(FALLBACK),
                "the emulator suite itself builds with the fallback headers on this machine");
        EmuToolchain.checkCompiles(FALLBACK);
    }

    private static void check(Path headers, long seed) throws IOException, InterruptedException {
        List<Integer> inputs = new ArrayList<>();
        Random r = new Random(seed);
        for (int signExp = 0; signExp < 512; signExp++) {
            for (int m : TIE_MANTISSAS) {
                inputs.add(signExp << 23 | m);
            }
            for (int k = 0; k < 8; k++) {
                inputs.add(signExp << 23 | r.nextInt(1 << 23));
            }
        }
        for (int k = 0; k < 1_000_000; k++) {
            inputs.add(r.nextInt());
        }
        Path exe = EmuToolchain.program("convert_check.cc", headers);
        Path in = Files.createTempFile(exe.getParent(), "in", ".bin");
        Path out = Files.createTempFile(exe.getParent(), "out", ".bin");
        ByteBuffer b = ByteBuffer.allocate(4 * inputs.size()).order(ByteOrder.LITTLE_ENDIAN);
        inputs.forEach(b::putInt);
        Files.write(in, b.array());
        Process p = new ProcessBuilder(exe.toString(), in.toString(), out.toString()).inheritIO().start();
        assertEquals(true, p.waitFor(60, TimeUnit.SECONDS), "convert_check timed out");
        assertEquals(0, p.exitValue(), "convert_check failed");
        ByteBuffer o = ByteBuffer.wrap(Files.readAllBytes(out)).order(ByteOrder.LITTLE_ENDIAN);
        Files.delete(in);
        Files.delete(out);

        String where = " with " + headers + " (seed " + seed + ")";
        for (int bits : inputs) {
            float f = Float.intBitsToFloat(bits);
            short half = o.getShort();
            short bf16 = o.getShort();
            if (Float.isNaN(f)) {
                assertEquals(true, Float.isNaN(DType.halfToFloat(half)), "fp16 of NaN 0x" + Integer.toHexString(bits) + where);
                assertEquals(true, Float.isNaN(DType.bf16ToFloat(bf16)), "bf16 of NaN 0x" + Integer.toHexString(bits) + where);
            } else {
                assertEquals(DType.floatToHalf(f), half, "fp16 of " + f + " (0x" + Integer.toHexString(bits) + ")" + where);
                assertEquals(DType.floatToBf16(f), bf16, "bf16 of " + f + " (0x" + Integer.toHexString(bits) + ")" + where);
            }
        }
        for (int x = 0; x < 65536; x++) {
            float fromHalf = o.getFloat();
            float fromBf16 = o.getFloat();
            float wantHalf = DType.halfToFloat((short) x);
            float wantBf16 = DType.bf16ToFloat((short) x);
            assertEquals(Float.isNaN(wantHalf) ? "NaN" : Integer.toHexString(Float.floatToRawIntBits(wantHalf)),
                    Float.isNaN(fromHalf) ? "NaN" : Integer.toHexString(Float.floatToRawIntBits(fromHalf)),
                    "fp16 0x" + Integer.toHexString(x) + " widened" + where);
            assertEquals(Float.isNaN(wantBf16) ? "NaN" : Integer.toHexString(Float.floatToRawIntBits(wantBf16)),
                    Float.isNaN(fromBf16) ? "NaN" : Integer.toHexString(Float.floatToRawIntBits(fromBf16)),
                    "bf16 0x" + Integer.toHexString(x) + " widened" + where);
        }
    }
}
