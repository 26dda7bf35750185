// The emulator's bf16 where no CUDA toolkit is installed: the top 16 bits of an fp32, rounded to
// nearest even as DType.floatToBf16 rounds (NaN kept quiet). EmulatorConversionsTest holds these
// to DType, and to CUDA's own host-side conversions where the toolkit is present.
#pragma once

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    uint16_t __x;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((bits >> 16) | 0x0040u)};
    uint32_t lsb = (bits >> 16) & 1u;
    return {static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16)};   // a carry into the exponent gives inf
}

inline float __bfloat162float(__nv_bfloat16 b) {
    uint32_t bits = static_cast<uint32_t>(b.__x) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
