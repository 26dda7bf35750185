// RMSNorm over the last dim (eps given by the caller): one warp per row for the forward and for
// dinp, as layernorm.cu, and deterministic column sums for dweight (no atomics).
#include "common.cuh"

// out (N, C) = inp · rstd · weight, rstd (N) F32 = 1 / √(mean_c(inp²) + eps).
// Block 256 (8 rows), grid ceil(N / 8).
extern "C" __global__ void rmsnorm_forward_kernel(const void* inp, int inpDt, const void* weight, int wDt,
                                                  void* out, int outDt, float* rstd, long long N, int C, float eps) {
    long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    long long base = row * C;
    float ss = 0.f;
    for (int c = lane; c < C; c += 32) {
        float x = ld(inp, inpDt, base + c);
        ss += x * x;
    }
    float r = 1.f / sqrtf(warp_sum(ss) / C + eps);
    for (int c = lane; c < C; c += 32) {
        st(out, outDt, base + c, ld(inp, inpDt, base + c) * r * ld(weight, wDt, c));
    }
    if (lane == 0) rstd[row] = r;
}

// dinp (N, C) += (w·dout − norm · mean_c(w·dout·norm)) · rstd with norm = inp · rstd.
// Block 256 (8 rows), grid ceil(N / 8).
extern "C" __global__ void rmsnorm_backward_dinp_kernel(const void* dout, int doutDt, const void* inp, int inpDt,
                                                        const void* weight, int wDt, const float* rstd,
                                                        void* dinp, int dinpDt, long long N, int C) {
    long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    long long base = row * C;
    float r = rstd[row];
    float sumGN = 0.f;
    for (int c = lane; c < C; c += 32) {
        float g = ld(weight, wDt, c) * ld(dout, doutDt, base + c);
        sumGN += g * (ld(inp, inpDt, base + c) * r);
    }
    float meanGN = warp_sum(sumGN) / C;
    for (int c = lane; c < C; c += 32) {
        float g = ld(weight, wDt, c) * ld(dout, doutDt, base + c);
        float n = ld(inp, inpDt, base + c) * r;
        st(dinp, dinpDt, base + c, ld(dinp, dinpDt, base + c) + (g - n * meanGN) * r);
    }
}

// dweight (C) += Σ_r dout · inp · rstd.
// Block (COLSUM_TX, COLSUM_TY), grid (ceil(C / COLSUM_TX), chunks) (column_sums; with several chunks
// the sums go to partials).
extern "C" __global__ void rmsnorm_backward_weight_kernel(const void* dout, int doutDt, const void* inp, int inpDt,
                                                          const float* rstd, void* dweight, int dwDt,
                                                          long long N, int C, float* partials,
                                                          long long rowsPerChunk) {
    float sum[1];
    auto value = [&](long long r, int c, float (&acc)[1]) {
        acc[0] += ld(dout, doutDt, r * C + c) * (ld(inp, inpDt, r * C + c) * rstd[r]);
    };
    if (column_sums<1>(N, rowsPerChunk, C, value, sum)) {
        int c = blockIdx.x * COLSUM_TX + threadIdx.x;
        if (!column_partials_store<1>(partials, C, c, sum)) st(dweight, dwDt, c, ld(dweight, dwDt, c) + sum[0]);
    }
}
