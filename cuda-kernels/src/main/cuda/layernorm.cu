// LayerNorm over the last dim (eps 1e-5): one warp per row for the forward and for dinp, and
// deterministic column sums for dweight/dbias (no atomics).
#include "common.cuh"

#define LN_EPS 1e-5f

// out (N, C) = (inp − mean) · rstd · weight + bias; mean, rstd (N) F32.
// Block 256 (8 rows), grid ceil(N / 8).
extern "C" __global__ void layernorm_forward_kernel(const void* inp, int inpDt, const void* weight, int wDt,
                                                    const void* bias, int bDt, void* out, int outDt,
                                                    float* mean, float* rstd, long long N, int C) {
    long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    long long base = row * C;
    float s = 0.f;
    for (int c = lane; c < C; c += 32) s += ld(inp, inpDt, base + c);
    float m = warp_sum(s) / C;
    float v = 0.f;
    for (int c = lane; c < C; c += 32) {
        float d = ld(inp, inpDt, base + c) - m;
        v += d * d;
    }
    float r = 1.f / sqrtf(warp_sum(v) / C + LN_EPS);
    for (int c = lane; c < C; c += 32) {
        float n = (ld(inp, inpDt, base + c) - m) * r;
        st(out, outDt, base + c, n * ld(weight, wDt, c) + ld(bias, bDt, c));
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// dinp (N, C) += (w·dout − mean_c(w·dout) − norm · mean_c(w·dout·norm)) · rstd.
// Block 256 (8 rows), grid ceil(N / 8).
extern "C" __global__ void layernorm_backward_dinp_kernel(const void* dout, int doutDt, const void* inp, int inpDt,
                                                          const void* weight, int wDt, const float* mean,
                                                          const float* rstd, void* dinp, int dinpDt,
                                                          long long N, int C) {
    long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    long long base = row * C;
    float m = mean[row], r = rstd[row];
    float sumG = 0.f, sumGN = 0.f;
    for (int c = lane; c < C; c += 32) {
        float g = ld(weight, wDt, c) * ld(dout, doutDt, base + c);
        float n = (ld(inp, inpDt, base + c) - m) * r;
        sumG += g;
        sumGN += g * n;
    }
    float meanG = warp_sum(sumG) / C;
    float meanGN = warp_sum(sumGN) / C;
    for (int c = lane; c < C; c += 32) {
        float g = ld(weight, wDt, c) * ld(dout, doutDt, base + c);
        float n = (ld(inp, inpDt, base + c) - m) * r;
        st(dinp, dinpDt, base + c, ld(dinp, dinpDt, base + c) + (g - meanG - n * meanGN) * r);
    }
}

// dweight (C) += Σ_r dout · norm; dbias (C) += Σ_r dout.
// Block (COLSUM_TX, COLSUM_TY), grid (ceil(C / COLSUM_TX), chunks) (column_sums; with several
// chunks the sums go to partials, (chunks, 2, C): dweight's then dbias's).
extern "C" __global__ void layernorm_backward_params_kernel(const void* dout, int doutDt, const void* inp, int inpDt,
                                                            const float* mean, const float* rstd,
                                                            void* dweight, int dwDt, void* dbias, int dbDt,
                                                            long long N, int C, float* partials,
                                                            long long rowsPerChunk) {
    float sum[2];
    auto value = [&](long long r, int c, float (&acc)[2]) {
        float d = ld(dout, doutDt, r * C + c);
        acc[0] += d * (ld(inp, inpDt, r * C + c) - mean[r]) * rstd[r];
        acc[1] += d;
    };
    if (column_sums<2>(N, rowsPerChunk, C, value, sum)) {
        int c = blockIdx.x * COLSUM_TX + threadIdx.x;
        if (!column_partials_store<2>(partials, C, c, sum)) {
            st(dweight, dwDt, c, ld(dweight, dwDt, c) + sum[0]);
            st(dbias, dbDt, c, ld(dbias, dbDt, c) + sum[1]);
        }
    }
}
