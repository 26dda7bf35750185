// exp in fp32 without leaving fp32 (Cephes' expf): the GELU loops spend most of their time in
// exp, and Math.exp works in double through a stub call per element. Range reduction
// x = n·ln2 + r with ln2 split in two parts keeps r exact, a degree-6 polynomial gives e^r,
// and 2^n goes straight into the exponent bits: about 1 ulp of fp32, the same bits on every
// thread (pure fp32 arithmetic, no intrinsic whose result could vary).
package org.fsdp4j.backend.cpu;

final class FloatExp {

    /** The argument is clamped here: 2^n stays a normal float (n in [-126, 127]). */
    static final float MIN_ARG = -87f;
    static final float MAX_ARG = 88f;

    /**
     * The activations' far tails (Gelu, the SiLU of ElementwiseOps) need e^a for a below MIN_ARG,
     * down to where their results underflow: e^(a + TAIL_SHIFT) · EXP_MINUS_TAIL_SHIFT keeps them
     * right into fp32's subnormals instead of stuck at e^MIN_ARG·x, which huge x made large.
     */
    static final float TAIL_SHIFT = 64f;
    /** e^−64 rounded to fp32 (within 3e-8 of it); common.cuh spells it 1.6038109e-28f. */
    static final float EXP_MINUS_TAIL_SHIFT = (float) Math.exp(-TAIL_SHIFT);

    static final float LOG2E = 1.44269504088896341f;
    static final float LN2_HI = 0.693359375f;          // exact in 9 bits, so n·LN2_HI is exact
    static final float LN2_LO = -2.12194440e-4f;
    static final float ROUNDER = 0x1.8p23f;                   // 1.5·2^23
    // the polynomial for e^r, highest degree first (Simd.exp uses the same)
    static final float P0 = 1.9875691500e-4f;
    static final float P1 = 1.3981999507e-3f;
    static final float P2 = 8.3334519073e-3f;
    static final float P3 = 4.1665795894e-2f;
    static final float P4 = 1.6666665459e-1f;
    static final float P5 = 5.0000001201e-1f;

    private FloatExp() {
    }

    /** e^x for x clamped to [MIN_ARG, MAX_ARG]. */
    static float exp(float x) {
        // compares, not Math.min/max (whose NaN and −0 handling costs a quarter of the GELU
        // loop); a NaN passes through both and comes out NaN, so non-finite checks still see it
        x = x < MIN_ARG ? MIN_ARG : (x > MAX_ARG ? MAX_ARG : x);
        // adding 1.5·2^23 rounds x·log2(e) to the nearest integer n and leaves n in the low
        // mantissa bits; shifted left by 23 they become 2^n's exponent (the constant's own bits
        // shift out), so no conversion through double or int is needed
        float shifted = x * LOG2E + ROUNDER;
        float n = shifted - ROUNDER;
        float twoToN = Float.intBitsToFloat((Float.floatToRawIntBits(shifted) << 23) + (127 << 23));
        float r = x - n * LN2_HI - n * LN2_LO;
        float p = P0;
        p = p * r + P1;
        p = p * r + P2;
        p = p * r + P3;
        p = p * r + P4;
        p = p * r + P5;
        return (p * (r * r) + r + 1f) * twoToN;
    }
}
