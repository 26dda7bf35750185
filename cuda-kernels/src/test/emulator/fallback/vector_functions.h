// The emulator's make_* for fallback/vector_types.h (CUDA's vector_functions.h, where no toolkit
// is installed).
#pragma once

#include "vector_types.h"

inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) {
    return uint3{x, y, z};
}

inline float2 make_float2(float x, float y) {
    return float2{x, y};
}
