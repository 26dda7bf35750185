// Shared by every kernel file: the dtype codes the Java launchers pass, fp32 load/store for
// each storage dtype (round to nearest even on store, as DType does on the host), and the
// fixed-order reductions that keep every kernel deterministic.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// Must match org.fsdp4j.cuda.KernelDType.
#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_I32 3

// Elements as fp32 whatever the storage dtype; the branch is uniform across a launch.
__device__ __forceinline__ float ld(const void* p, int dt, long long i) {
    if (dt == DT_F32) return static_cast<const float*>(p)[i];
    if (dt == DT_F16) return __half2float(static_cast<const __half*>(p)[i]);
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ __forceinline__ void st(void* p, int dt, long long i, float v) {
    if (dt == DT_F32) static_cast<float*>(p)[i] = v;
    else if (dt == DT_F16) static_cast<__half*>(p)[i] = __float2half_rn(v);
    else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// e^a with the argument clamped to [−87, 88] by compares, as the CPU backend's FloatExp.exp
// clamps it: 2^n stays a normal float, and NaN stays NaN. The GELU and SiLU use it.
__device__ __forceinline__ float exp_clamped(float a) {
    a = a < -87.f ? -87.f : (a > 88.f ? 88.f : a);
    return expf(a);
}

// The activations' far tails need e^a for a below the clamp, down to where their results
// underflow: e^(a + TAIL_SHIFT)·EXP_MINUS_TAIL_SHIFT (e^−64 rounded to fp32, as FloatExp's) keeps
// them right into fp32's subnormals instead of stuck at e^−87·x, which huge x made large.
#define TAIL_SHIFT 64.f
#define EXP_MINUS_TAIL_SHIFT 1.6038109e-28f

// A (rows, cols) matrix row by row: grid y over rows (striding past the grid's 65535), grid x and
// the threads over a row's columns, so a column index needs no 64-bit division or modulo (which
// made flat-index element-wise kernels compute-bound on an H200). Launch: Grid.rows, Grid.rowColumns.
#define FOR_ROWS(r, rows) for (long long r = blockIdx.y; r < (rows); r += gridDim.y)
#define FOR_ROW_COLS(j, cols) \
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < (cols); j += blockDim.x * gridDim.x)

#define GRID_STRIDE(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

// Butterfly reductions: every lane ends with the same, order-fixed result.
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024), returned to every
// thread. Callable repeatedly: the trailing barrier protects the scratch for the next call.
template <typename T>
__device__ T block_sum(T v) {
    __shared__ T scratch[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    T total = lane < warps ? scratch[lane] : T(0);
    total = warp_sum(total);
    __syncthreads();
    return total;
}

__device__ __forceinline__ float block_max(float v) {
    __shared__ float scratch[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float m = lane < warps ? scratch[lane] : -INFINITY;
    m = warp_max(m);
    __syncthreads();
    return m;
}

// Deterministic column sums of a (rows, cols) matrix for K quantities at once. Launch with
// block (COLSUM_TX, COLSUM_TY) and grid (ceil(cols / COLSUM_TX), chunks): block row y sums rows
// [y·rowsPerChunk, (y+1)·rowsPerChunk), each thread a strided set of them in a fixed order, then
// row 0 of the block adds the COLSUM_TY partials in order. value(r, c, acc) adds row r's
// contributions for column c into acc[0..K). Returns true in the one thread per column and
// chunk that holds the chunk's totals in sum. With one chunk the caller adds them to its outputs;
// with several (ColumnSums.java: enough blocks to fill the GPU when cols is small) it stores them
// with column_partials_store and column_partials_kernel adds the chunks up, in chunk order.
#define COLSUM_TX 32
#define COLSUM_TY 16
template <int K, typename F>
__device__ bool column_sums(long long rows, long long rowsPerChunk, int cols, F value, float (&sum)[K]) {
    __shared__ float part[K][COLSUM_TY][COLSUM_TX];
    int c = blockIdx.x * COLSUM_TX + threadIdx.x;
    long long begin = blockIdx.y * rowsPerChunk;
    long long end = begin + rowsPerChunk < rows ? begin + rowsPerChunk : rows;
    float acc[K];
    for (int k = 0; k < K; k++) acc[k] = 0.f;
    if (c < cols) {
        for (long long r = begin + threadIdx.y; r < end; r += COLSUM_TY) value(r, c, acc);
    }
    for (int k = 0; k < K; k++) part[k][threadIdx.y][threadIdx.x] = acc[k];
    __syncthreads();
    if (threadIdx.y != 0 || c >= cols) return false;
    for (int k = 0; k < K; k++) {
        float s = 0.f;
        for (int y = 0; y < COLSUM_TY; y++) s += part[k][y][threadIdx.x];
        sum[k] = s;
    }
    return true;
}

// With several chunks (partials != NULL): stores this chunk's K sums of column c in
// partials (chunks, K, cols) and returns true; with one chunk returns false (the caller adds them
// to its outputs itself).
template <int K>
__device__ bool column_partials_store(float* partials, int cols, int c, const float (&sum)[K]) {
    if (partials == nullptr) return false;
    for (int k = 0; k < K; k++) partials[((long long)blockIdx.y * K + k) * cols + c] = sum[k];
    return true;
}
