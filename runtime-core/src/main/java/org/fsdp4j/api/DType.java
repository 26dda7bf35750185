// The element types fsdp4j stores: fp32 masters and activations, fp16/bf16 for gathered
// parameters and reductions, int32 for token ids. Conversions round to nearest, ties to even,
// exactly as CUDA's __float2half_rn / __float2bfloat16_rn and PyTorch's .to(dtype) do.
package org.fsdp4j.api;

import java.util.Locale;

/**
 * The element type of a {@link Tensor}. fp32 holds the master parameters, the optimizer state,
 * the loss and statistics; fp16 or bf16 hold gathered parameters, activations and reduced
 * gradients under a {@link MixedPrecisionPolicy}; int32 holds token ids and class labels.
 *
 * <p>Conversions from fp32 round to nearest, ties to even, as CUDA's {@code __float2half_rn} /
 * {@code __float2bfloat16_rn} and PyTorch's {@code .to(dtype)} do. The static conversion methods
 * work on raw 16-bit patterns held in a {@code short}; they are pure and may be called from any
 * thread.
 */
public enum DType {
    /** IEEE binary32, 4 bytes: master parameters, optimizer state, losses, norm statistics. */
    F32(4, "fp32"),
    /**
     * IEEE binary16, 2 bytes (5 exponent, 10 mantissa bits; largest finite value 65504): needs
     * loss scaling when gradients pass through it (see {@link MixedPrecisionPolicy#needsLossScaling()}).
     */
    F16(2, "fp16"),
    /** bfloat16, 2 bytes: the top 16 bits of an fp32 (fp32's exponent range, 7 mantissa bits). */
    BF16(2, "bf16"),
    /** Two's-complement 32-bit integer, 4 bytes: token ids, class labels. Not a floating dtype. */
    I32(4, "int32");

    private final int byteSize;
    private final String shortName;

    DType(int byteSize, String shortName) {
        this.byteSize = byteSize;
        this.shortName = shortName;
    }

    /**
     * Bytes per element.
     *
     * @return 4 for F32 and I32, 2 for F16 and BF16
     */
    public int byteSize() {
        return byteSize;
    }

    /**
     * The name used on the command line and in summaries.
     *
     * @return "fp32", "fp16", "bf16" or "int32"
     */
    public String shortName() {
        return shortName;
    }

    /**
     * Whether this is a floating-point dtype, the kind parameters, activations and gradients take.
     *
     * @return true for F32, F16 and BF16; false for I32
     */
    public boolean isFloating() {
        return this != I32;
    }

    /**
     * Whether this is a 16-bit floating dtype.
     *
     * @return true for F16 and BF16
     */
    public boolean isHalf() {
        return this == F16 || this == BF16;
    }

    /**
     * Parses a floating dtype's name as the command line gives it, ignoring case and surrounding
     * blanks: fp32, f32, float32 or float; fp16, f16, float16 or half; bf16 or bfloat16.
     *
     * @param name the name
     * @return F32, F16 or BF16 (never I32)
     * @throws IllegalArgumentException if the name is none of these; the message lists what is accepted
     * @throws NullPointerException if {@code name} is null
     */
    public static DType parseFloating(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        switch (n) {
            case "fp32": case "f32": case "float32": case "float": return F32;
            case "fp16": case "f16": case "float16": case "half": return F16;
            case "bf16": case "bfloat16": return BF16;
            default:
                throw new IllegalArgumentException("unknown dtype '" + name + "': use one of fp32, bf16, fp16");
        }
    }

    /**
     * Rounds a float to this dtype and back, which is what storing it in a tensor of this dtype
     * and reading it again gives: round to nearest even for F16 and BF16 (F16 overflows to
     * infinity above 65504 and keeps subnormals), the identity for F32 and I32.
     *
     * @param x any float
     * @return {@code x} as this dtype holds it, widened to fp32
     */
    public float round(float x) {
        switch (this) {
            case F16: return halfToFloat(floatToHalf(x));
            case BF16: return bf16ToFloat(floatToBf16(x));
            default: return x;
        }
    }

    // ---- bf16: the top 16 bits of an IEEE float ----

    /**
     * fp32 to bf16 bits, rounding to nearest even; a value past bf16's largest finite value
     * becomes infinity, and a NaN stays a (quiet) NaN with its sign.
     *
     * @param f any float
     * @return the bf16 bit pattern (the top 16 bits of the rounded fp32)
     */
    public static short floatToBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if ((bits & 0x7fffffff) > 0x7f800000) {            // NaN: keep sign, force a quiet mantissa bit
            return (short) ((bits >>> 16) | 0x0040);
        }
        int lsb = (bits >>> 16) & 1;
        int rounded = bits + 0x7fff + lsb;                 // overflow into the exponent gives inf, as it should
        return (short) (rounded >>> 16);
    }

    /**
     * bf16 bits to fp32; exact (every bf16 value is an fp32 value).
     *
     * @param b a bf16 bit pattern
     * @return its value
     */
    public static float bf16ToFloat(short b) {
        return Float.intBitsToFloat((b & 0xffff) << 16);
    }

    // ---- fp16: IEEE binary16 (1 sign, 5 exponent, 10 mantissa bits) ----

    /**
     * fp32 to IEEE fp16 bits, rounding to nearest even: magnitudes from 65520 up become infinity,
     * magnitudes below 2<sup>-14</sup> become fp16 subnormals (or zero, up to 2<sup>-25</sup>),
     * and a NaN stays a quiet NaN with its sign.
     *
     * @param f any float
     * @return the fp16 bit pattern
     */
    public static short floatToHalf(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int abs = bits & 0x7fffffff;
        if (abs > 0x7f800000) {                            // NaN
            return (short) (sign | 0x7e00 | ((abs >>> 13) & 0x3ff));
        }
        if (abs >= 0x477ff000) {                           // >= 65520 rounds to inf (and inf itself)
            return (short) (sign | 0x7c00);
        }
        if (abs < 0x38800000) {                            // below 2^-14: subnormal half or zero
            if (abs < 0x33000000) {                        // below 2^-25: rounds to zero (2^-25 is a tie to even 0)
                return (short) sign;
            }
            int exp = abs >>> 23;
            int mant = (abs & 0x7fffff) | 0x800000;        // implicit bit
            // value = mant * 2^(exp-150) and the half subnormal unit is 2^-24, so drop 126-exp bits
            int shift = 126 - exp;
            int keep = mant >>> shift;
            int rem = mant & ((1 << shift) - 1);
            int halfway = 1 << (shift - 1);
            if (rem > halfway || (rem == halfway && (keep & 1) == 1)) {
                keep++;
            }
            return (short) (sign | keep);
        }
        // normal: rebias exponent 127 -> 15, drop 13 mantissa bits with RNE
        int h = ((abs - 0x38000000) >>> 13);
        int rem = abs & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1) == 1)) {
            h++;                                            // may carry into the exponent, correctly
        }
        return (short) (sign | h);
    }

    /**
     * IEEE fp16 bits to fp32; exact (subnormals, infinities and NaN included).
     *
     * @param hs an fp16 bit pattern
     * @return its value
     */
    public static float halfToFloat(short hs) {
        int h = hs & 0xffff;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1f;
        int mant = h & 0x3ff;
        if (exp == 0x1f) {                                  // inf / NaN
            return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        }
        if (exp == 0) {
            if (mant == 0) {
                return Float.intBitsToFloat(sign);
            }
            float v = mant * 0x1p-24f;                      // subnormal: exact in fp32
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }
}
