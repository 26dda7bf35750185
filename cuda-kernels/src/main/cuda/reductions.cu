// Norms, scaling and the inf/NaN check that gradient clipping and loss scaling need.
// Sums accumulate in fp64 in a fixed order (grid-stride per thread, then block trees, then
// one block over the per-block partials), so a result depends only on the data and its size.
#include "common.cuh"

// t (n) *= alpha.
extern "C" __global__ void scale_kernel(void* t, int dt, long long n, float alpha) {
    GRID_STRIDE(i, n) st(t, dt, i, ld(t, dt, i) * alpha);
}

// partials[block] = Σ x (or Σ x² when squared) over this block's grid-stride slice.
extern "C" __global__ void partial_sum_kernel(const void* x, int dt, long long n, int squared, double* partials) {
    double s = 0.0;
    GRID_STRIDE(i, n) {
        double v = ld(x, dt, i);
        s += squared ? v * v : v;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// out[0] = Σ partials (count); one block.
extern "C" __global__ void final_sum_kernel(const double* partials, int count, double* out) {
    double s = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
    s = block_sum(s);
    if (threadIdx.x == 0) out[0] = s;
}

// out[0] += scale · Σ partials (count), rounded once to fp32: a sum that stays on the device
// (the step's loss and norm, read by the host once). One block.
extern "C" __global__ void final_sum_into_kernel(const double* partials, int count, float scale, float* out) {
    double s = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
    s = block_sum(s);
    if (threadIdx.x == 0) out[0] = (float)((double)out[0] + (double)scale * s);
}

// flag[0] = 1 if any x is ±inf or NaN; the launcher zeroes the flag first.
extern "C" __global__ void nonfinite_kernel(const void* x, int dt, long long n, int* flag) {
    GRID_STRIDE(i, n) {
        if (!isfinite(ld(x, dt, i))) flag[0] = 1;
    }
}
