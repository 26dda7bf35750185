// Rotary position embeddings over head-major (B, H, T, D) in the half-split convention (GPT-NeoX,
// Hugging Face's rotate_half): the pair (x_i, x_{i+D/2}) of position t turns by the angle whose
// cosine and sine are the F32 tables' entries [t, i]. One thread per pair reads both elements
// before it writes them, so out may be inp (in place). sign −1 turns back: the backward.
#include "common.cuh"

// out (rows = B·H·T, 2·half) = inp turned; cos, sin (≥ T, half) F32; position t = row mod T.
extern "C" __global__ void rope_kernel(const void* inp, int inpDt, const float* cos, const float* sin,
                                       void* out, int outDt, long long rows, int T, int half, float sign) {
    GRID_STRIDE(i, rows * half) {
        long long row = i / half;
        int j = i % half;
        int t = row % T;
        long long base = row * 2 * half;
        float x1 = ld(inp, inpDt, base + j);
        float x2 = ld(inp, inpDt, base + j + half);
        float c = cos[(long long)t * half + j];
        float s = sign * sin[(long long)t * half + j];
        st(out, outDt, base + j, x1 * c - x2 * s);
        st(out, outDt, base + j + half, x2 * c + x1 * s);
    }
}
