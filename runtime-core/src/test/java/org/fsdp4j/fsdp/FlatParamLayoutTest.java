// The layout arithmetic: a hand-worked example, then random units checked for the invariants
// every other part relies on (alignment, padding, each element in exactly one shard once).
package org.fsdp4j.fsdp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.ParamSpec;
import org.junit.jupiter.api.Test;

class FlatParamLayoutTest {

    private static final List<ParamSpec> EXAMPLE = List.of(
            ParamSpec.normal("w", 0.02, true, 3, 5),   // 15 elements
            ParamSpec.zeros("b", 7),                   // 7
            ParamSpec.ones("g", 2, 2));                // 4

    @Test
    void handWorkedFp32ExampleOverThreeShards() {
        FlatParamLayout l = FlatParamLayout.of(EXAMPLE, DType.F32, 3);
        // fp32 aligns starts to 4 elements: w [0,15), b [16,23), g [24,28); 28 → 30 for 3 shards of 10.
        assertEquals(0, l.offset(0));
        assertEquals(16, l.offset(1));
        assertEquals(24, l.offset(2));
        assertEquals(26, l.unpaddedNumel());
        assertEquals(30, l.numel());
        assertEquals(10, l.shardNumel());
        assertEquals(List.of(new ShardSlice(0, EXAMPLE.get(0), 0, 0, 10)), l.slices(0));
        assertEquals(List.of(new ShardSlice(0, EXAMPLE.get(0), 10, 0, 5),
                new ShardSlice(1, EXAMPLE.get(1), 0, 6, 4)), l.slices(1));
        assertEquals(List.of(new ShardSlice(1, EXAMPLE.get(1), 4, 0, 3),
                new ShardSlice(2, EXAMPLE.get(2), 0, 4, 4)), l.slices(2));
    }

    @Test
    void halfDtypesAlignToEightElements() {
        List<ParamSpec> p = List.of(ParamSpec.zeros("a", 9), ParamSpec.zeros("b", 1), ParamSpec.zeros("c", 3));
        FlatParamLayout f32 = FlatParamLayout.of(p, DType.F32, 1);
        FlatParamLayout bf16 = FlatParamLayout.of(p, DType.BF16, 1);
        assertEquals(List.of(0L, 12L, 16L), List.of(f32.offset(0), f32.offset(1), f32.offset(2)));
        assertEquals(List.of(0L, 16L, 24L), List.of(bf16.offset(0), bf16.offset(1), bf16.offset(2)));
        assertEquals(19, f32.numel());
        assertEquals(27, bf16.numel());
    }

    @Test
    void randomUnitsKeepEveryInvariant() {
        long seed = System.nanoTime();
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 300; trial++) {
            List<ParamSpec> params = new ArrayList<>();
            int count = 1 + rnd.nextInt(6);
            for (int i = 0; i < count; i++) {
                params.add(rnd.nextBoolean() ? ParamSpec.zeros("p" + i, 1 + rnd.nextInt(40))
                        : ParamSpec.normal("p" + i, 0.02, true, 1 + rnd.nextInt(9), 1 + rnd.nextInt(9)));
            }
            DType dtype = List.of(DType.F32, DType.F16, DType.BF16).get(rnd.nextInt(3));
            int shards = 1 + rnd.nextInt(9);
            String ctx = "seed " + seed + " trial " + trial + " " + params + " " + dtype + " N=" + shards;
            FlatParamLayout l = FlatParamLayout.of(params, dtype, shards);

            long align = 16 / dtype.byteSize();
            long end = 0;
            for (int i = 0; i < count; i++) {
                assertEquals(0, l.offset(i) % align, ctx);
                assertTrue(l.offset(i) >= end && l.offset(i) < end + align, ctx);
                end = l.offset(i) + params.get(i).numel();
            }
            assertEquals(0, l.numel() % shards, ctx);
            assertTrue(l.numel() >= end && l.numel() < end + shards, ctx);

            // Every element of every parameter appears in exactly one slice, at the right flat index.
            long[] covered = new long[count];
            for (int s = 0; s < shards; s++) {
                long shardOffset = -1;
                for (ShardSlice sl : l.slices(s)) {
                    assertTrue(sl.shardOffset() > shardOffset && sl.shardOffset() + sl.numel() <= l.shardNumel(), ctx);
                    shardOffset = sl.shardOffset();
                    assertEquals(l.offset(sl.paramIndex()) + sl.paramOffset(), s * l.shardNumel() + sl.shardOffset(), ctx);
                    assertEquals(covered[sl.paramIndex()], sl.paramOffset(), ctx);
                    covered[sl.paramIndex()] += sl.numel();
                }
            }
            for (int i = 0; i < count; i++) {
                assertEquals(params.get(i).numel(), covered[i], ctx);
            }
        }
    }

    @Test
    void badArgumentsAreRejectedWithTheReason() {
        assertThrows(IllegalArgumentException.class, () -> FlatParamLayout.of(EXAMPLE, DType.F32, 0));
        assertThrows(IllegalArgumentException.class, () -> FlatParamLayout.of(List.of(), DType.F32, 2));
        assertThrows(IllegalArgumentException.class, () -> FlatParamLayout.of(EXAMPLE, DType.I32, 2));
        assertThrows(IllegalArgumentException.class, () -> FlatParamLayout.of(EXAMPLE, DType.F32, 2).slices(2));
    }
}
