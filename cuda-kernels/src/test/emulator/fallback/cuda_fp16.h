// The emulator's fp16 where no CUDA toolkit is installed: the storage type and the two
// conversions the kernels use, rounding exactly as DType.floatToHalf / halfToFloat (round to
// nearest even, subnormals, overflow to inf, NaN kept). EmulatorConversionsTest holds these to
// DType, and to CUDA's own host-side conversions where the toolkit is present.
#pragma once

#include <stdint.h>
#include <string.h>

struct __half {
    uint16_t __x;
};

inline __half __float2half_rn(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};   // NaN
    if (abs >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};   // >= 65520: inf
    if (abs < 0x38800000u) {                                                  // below 2^-14: subnormal or 0
        if (abs < 0x33000000u) return {sign};                                 // below 2^-25: 0 (2^-25 ties to 0)
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp;
        uint32_t keep = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (keep & 1u))) keep++;
        return {static_cast<uint16_t>(sign | keep)};
    }
    uint32_t h = (abs - 0x38000000u) >> 13;   // rebias 127 -> 15, drop 13 bits, round to nearest even
    uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return {static_cast<uint16_t>(sign | h)};
}

inline float __half2float(__half h) {
    uint32_t sign = static_cast<uint32_t>(h.__x & 0x8000u) << 16;
    uint32_t exp = (h.__x >> 10) & 0x1fu;
    uint32_t mant = h.__x & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        float v = static_cast<float>(mant) * 0x1p-24f;   // subnormal (or 0): exact in fp32
        return sign ? -v : v;
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
