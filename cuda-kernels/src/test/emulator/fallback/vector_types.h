// The emulator's CUDA vector types where no CUDA toolkit is installed: the ones the kernels and
// the emulator use (threadIdx/blockIdx are uint3, blockDim/gridDim dim3, float2 for pairs).
#pragma once

struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

struct alignas(8) float2 {
    float x, y;
};
