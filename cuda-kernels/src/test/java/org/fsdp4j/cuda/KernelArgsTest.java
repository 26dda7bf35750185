// The kernel-argument block cuLaunchKernel reads, checked without a GPU: slot i points at its
// own 8 bytes, and each Java value lands there in the C type it stands for.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class KernelArgsTest {

    @Test
    void valuesLandInConsecutiveEightByteSlots() {
        KernelArgs args = new KernelArgs().pack(0x1234_5678_9abcL, -7, 1.5f, 3_000_000_000L);
        assertEquals(4, args.count());
        for (int i = 1; i < 4; i++) {
            assertEquals(args.slotTarget(0) + 8L * i, args.slotTarget(i), "slot " + i);
        }
        assertEquals(0x1234_5678_9abcL, args.slotValue(0));
        assertEquals(0xffff_fff9L, args.slotValue(1), "int -7 in the low 4 bytes, zeros above");
        assertEquals(Float.floatToRawIntBits(1.5f), (int) args.slotValue(2));
        assertEquals(3_000_000_000L, args.slotValue(3));
        args.pack(5);
        assertEquals(5L, args.slotValue(0), "a repack clears the old bytes");
    }

    @Test
    void unsupportedArgumentsAreRejected() {
        KernelArgs args = new KernelArgs();
        assertThrows(IllegalArgumentException.class, () -> args.pack(1.0));
        assertThrows(IllegalArgumentException.class, () -> args.pack(new Object[KernelArgs.MAX_ARGS + 1]));
    }
}
