// DType's fp16/bf16 conversions against an independent slow reference: each 16-bit pattern is
// decoded with Math.scalb in double, and a float is rounded by finding the nearest representable
// value by binary search, ties to the even pattern, and overflow treated as the next step up
// (inf). The distances are exact in double: x and its two neighbours have at most 24
// significant bits and lie within a factor of 2 of each other (or one is 0 or all share the
// subnormal quantum), so their differences need far fewer than 53 bits. Inputs: all 65536 patterns, random bit patterns (NaN, inf, subnormals,
// every exponent) and the exact midpoints between neighbours (the ties) with their neighbours.
package org.fsdp4j.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Random;
import org.junit.jupiter.api.Test;

class DTypeTest {

    /** Value of an fp16 pattern, decoded from the IEEE binary16 definition. */
    static double refHalf(int bits) {
        int sign = (bits >> 15) & 1;
        int exp = (bits >> 10) & 0x1f;
        int mant = bits & 0x3ff;
        double v;
        if (exp == 0x1f) {
            v = mant == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
        } else if (exp == 0) {
            v = Math.scalb((double) mant, -24);
        } else {
            v = Math.scalb(1024.0 + mant, exp - 25);
        }
        return sign == 1 ? -v : v;
    }

    /** Value of a bf16 pattern: 1 sign, 8 exponent (bias 127), 7 mantissa bits. */
    static double refBf16(int bits) {
        int sign = (bits >> 15) & 1;
        int exp = (bits >> 7) & 0xff;
        int mant = bits & 0x7f;
        double v;
        if (exp == 0xff) {
            v = mant == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
        } else if (exp == 0) {
            v = Math.scalb((double) mant, -133);
        } else {
            v = Math.scalb(128.0 + mant, exp - 134);
        }
        return sign == 1 ? -v : v;
    }

    /**
     * Round-to-nearest-even of f among the positive finite patterns [0, infBits) whose values
     * {@code ladder} lists in increasing order, with ladder[infBits] = the value one step past the
     * largest finite (where IEEE overflow rounds to inf). Returns the pattern, sign included.
     */
    static int refRound(float f, double[] ladder, int infBits) {
        int sign = Float.floatToRawIntBits(f) < 0 ? 0x8000 : 0;
        double x = Math.abs((double) f);
        int lo = 0;
        int hi = infBits;
        if (x >= ladder[hi]) {
            return sign | infBits;
        }
        while (hi - lo > 1) {   // invariant: ladder[lo] <= x < ladder[hi]
            int mid = (lo + hi) >>> 1;
            if (ladder[mid] <= x) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        int cmp = Double.compare(x - ladder[lo], ladder[hi] - x);
        int pick = cmp < 0 ? lo : cmp > 0 ? hi : ((lo & 1) == 0 ? lo : hi);
        return sign | pick;
    }

    private static final double[] HALF_LADDER = ladder(0x7c00, DTypeTest::refHalf, 65536.0);
    private static final double[] BF16_LADDER = ladder(0x7f80, DTypeTest::refBf16, Math.scalb(1.0, 128));

    private static double[] ladder(int infBits, java.util.function.IntToDoubleFunction decode, double pastMax) {
        double[] l = new double[infBits + 1];
        for (int b = 0; b < infBits; b++) {
            l[b] = decode.applyAsDouble(b);
        }
        l[infBits] = pastMax;
        return l;
    }

    @Test
    void everyHalfPatternDecodesExactlyAndRoundTrips() {
        for (int bits = 0; bits < 1 << 16; bits++) {
            double ref = refHalf(bits);
            float f = DType.halfToFloat((short) bits);
            float b = DType.bf16ToFloat((short) bits);
            if (Double.isNaN(ref)) {
                assertTrue(Float.isNaN(f), Integer.toHexString(bits));
                int back = DType.floatToHalf(f) & 0xffff;
                assertEquals(bits & 0x8000, back & 0x8000, "NaN keeps its sign");
                assertTrue((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0, "fp16 NaN stays NaN");
            } else {
                assertEquals(ref, f, 0.0, "fp16 " + Integer.toHexString(bits));
                assertEquals(bits, DType.floatToHalf(f) & 0xffff, "fp16 round trip " + Integer.toHexString(bits));
            }
            double refB = refBf16(bits);
            if (Double.isNaN(refB)) {
                assertTrue(Float.isNaN(b));
                int back = DType.floatToBf16(b) & 0xffff;
                assertTrue((back & 0x7f80) == 0x7f80 && (back & 0x7f) != 0 && (back & 0x8000) == (bits & 0x8000));
            } else {
                assertEquals(refB, b, 0.0, "bf16 " + Integer.toHexString(bits));
                assertEquals(bits, DType.floatToBf16(b) & 0xffff, "bf16 round trip " + Integer.toHexString(bits));
            }
        }
    }

    private static void check(float f, long seed) {
        if (Float.isNaN(f)) {
            assertTrue(Float.isNaN(DType.halfToFloat(DType.floatToHalf(f))));
            assertTrue(Float.isNaN(DType.bf16ToFloat(DType.floatToBf16(f))));
            return;
        }
        int half = DType.floatToHalf(f) & 0xffff;
        int bf = DType.floatToBf16(f) & 0xffff;
        int refHalf = refRound(f, HALF_LADDER, 0x7c00);
        int refBf = refRound(f, BF16_LADDER, 0x7f80);
        if (half != refHalf || bf != refBf) {
            fail("float " + f + " (0x" + Integer.toHexString(Float.floatToRawIntBits(f)) + "): fp16 0x"
                    + Integer.toHexString(half) + " vs reference 0x" + Integer.toHexString(refHalf) + ", bf16 0x"
                    + Integer.toHexString(bf) + " vs reference 0x" + Integer.toHexString(refBf) + " (seed " + seed + ")");
        }
        assertEquals(DType.halfToFloat((short) half), DType.F16.round(f), 0f);
        assertEquals(DType.bf16ToFloat((short) bf), DType.BF16.round(f), 0f);
    }

    @Test
    void randomFloatsRoundToNearestEven() {
        long seed = System.nanoTime();
        Random r = new Random(seed);
        for (int i = 0; i < 100_000; i++) {
            check(Float.intBitsToFloat(r.nextInt()), seed);                     // every exponent, NaN, inf
            check((float) (r.nextGaussian() * Math.scalb(1.0, r.nextInt(40) - 26)), seed);   // the fp16 range
        }
    }

    @Test
    void tiesAndTheirNeighboursRoundToNearestEven() {
        long seed = System.nanoTime();
        Random r = new Random(seed);
        for (double[] ladder : new double[][] {HALF_LADDER, BF16_LADDER}) {
            for (int i = 0; i < 30_000; i++) {
                int b = ladder == HALF_LADDER ? r.nextInt(0x7c00) : r.nextInt(0x7f80);
                float mid = (float) ((ladder[b] + ladder[b + 1]) / 2);   // exact: needs 12 (fp16) or 9 (bf16) bits
                for (float f : new float[] {mid, Math.nextUp(mid), Math.nextDown(mid)}) {
                    check(f, seed);
                    check(-f, seed);
                }
            }
        }
        for (float f : new float[] {65504f, 65519.99f, 65520f, 65536f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f,
                                    0x1p-14f, Float.MIN_VALUE, Float.MAX_VALUE, 0f, -0f}) {
            check(f, seed);
            check(-f, seed);
        }
    }
}
