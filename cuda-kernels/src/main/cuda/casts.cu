// Dtype conversions between fp32, fp16 and bf16 (RNE), used by copy() and by the GEMM when
// operand dtypes are not a pair cuBLAS takes, and by the FSDP engine (fp32 master → half copy).
#include "common.cuh"

// dst (n) = src (n) converted; src and dst do not overlap.
extern "C" __global__ void cast_kernel(const void* src, int srcDt, void* dst, int dstDt, long long n) {
    GRID_STRIDE(i, n) st(dst, dstDt, i, ld(src, srcDt, i));
}
