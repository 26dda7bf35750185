// Attention plumbing around the two batched GEMMs: head split/merge (and their backward,
// which accumulate) and the causal softmax over (BH, T, T) scores, one warp per row.
#include "common.cuh"

// q, k, v (B, H, T, D) = qkv (B, T, 3C) laid out [q | k | v] per token, C = H·D.
extern "C" __global__ void split_heads_kernel(const void* qkv, int qkvDt, void* q, void* k, void* v, int outDt,
                                              int B, int T, int H, int D) {
    long long n = (long long)B * H * T * D;
    long long C = (long long)H * D;
    GRID_STRIDE(i, n) {
        int d = i % D;
        int t = (i / D) % T;
        int h = (i / ((long long)D * T)) % H;
        long long b = i / ((long long)D * T * H);
        long long src = (b * T + t) * 3 * C + (long long)h * D + d;
        st(q, outDt, i, ld(qkv, qkvDt, src));
        st(k, outDt, i, ld(qkv, qkvDt, src + C));
        st(v, outDt, i, ld(qkv, qkvDt, src + 2 * C));
    }
}

// dqkv (B, T, 3C) += dq | dk | dv (B, H, T, D), one thread per dqkv element (no races).
extern "C" __global__ void split_heads_backward_kernel(const void* dq, const void* dk, const void* dv, int inDt,
                                                       void* dqkv, int dqkvDt, int B, int T, int H, int D) {
    long long C = (long long)H * D;
    long long n = (long long)B * T * 3 * C;
    GRID_STRIDE(i, n) {
        long long bt = i / (3 * C);
        int which = (i / C) % 3;
        int hd = i % C;
        int h = hd / D, d = hd % D;
        long long b = bt / T;
        int t = bt % T;
        long long src = ((b * H + h) * T + t) * D + d;
        const void* g = which == 0 ? dq : (which == 1 ? dk : dv);
        st(dqkv, dqkvDt, i, ld(dqkv, dqkvDt, i) + ld(g, inDt, src));
    }
}

// out (B, T, H·D) = y (B, H, T, D) with the heads side by side.
extern "C" __global__ void merge_heads_kernel(const void* y, int yDt, void* out, int outDt, int B, int T, int H, int D) {
    long long C = (long long)H * D;
    long long n = (long long)B * T * C;
    GRID_STRIDE(i, n) {
        long long bt = i / C;
        int hd = i % C;
        int h = hd / D, d = hd % D;
        long long b = bt / T;
        int t = bt % T;
        st(out, outDt, i, ld(y, yDt, ((b * H + h) * T + t) * D + d));
    }
}

// dy (B, H, T, D) += dout (B, T, H·D) rearranged.
extern "C" __global__ void merge_heads_backward_kernel(const void* dout, int doutDt, void* dy, int dyDt,
                                                       int B, int T, int H, int D) {
    long long n = (long long)B * H * T * D;
    long long C = (long long)H * D;
    GRID_STRIDE(i, n) {
        int d = i % D;
        int t = (i / D) % T;
        int h = (i / ((long long)D * T)) % H;
        long long b = i / ((long long)D * T * H);
        st(dy, dyDt, i, ld(dy, dyDt, i) + ld(dout, doutDt, (b * T + t) * C + (long long)h * D + d));
    }
}

// att (BH, T, T): row i of each (T, T) block is softmax_{j ≤ i}(scale · preatt), zeros above the
// diagonal. One warp per row: block 256 (8 rows), grid ceil(BH·T / 8).
extern "C" __global__ void causal_softmax_forward_kernel(const void* preatt, int inDt, void* att, int outDt,
                                                         long long rows, int T, float scale) {
    long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t = row % T;
    long long base = row * T;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32) m = fmaxf(m, scale * ld(preatt, inDt, base + j));
    m = warp_max(m);
    float s = 0.f;
    for (int j = lane; j <= t; j += 32) s += expf(scale * ld(preatt, inDt, base + j) - m);
    float inv = 1.f / warp_sum(s);
    for (int j = lane; j < T; j += 32) {
        float a = j <= t ? expf(scale * ld(preatt, inDt, base + j) - m) * inv : 0.f;
        st(att, outDt, base + j, a);
    }
}

// dpreatt[i, j] += scale · att[i, j] · (datt[i, j] − Σ_{k ≤ i} att[i, k] · datt[i, k]) for j ≤ i
// (the entries above the diagonal get zero gradient and are left as they are).
extern "C" __global__ void causal_softmax_backward_kernel(const void* att, int attDt, const void* datt, int dattDt,
                                                          void* dpreatt, int dDt, long long rows, int T, float scale) {
    long long row = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t = row % T;
    long long base = row * T;
    float dot = 0.f;
    for (int j = lane; j <= t; j += 32) dot += ld(att, attDt, base + j) * ld(datt, dattDt, base + j);
    dot = warp_sum(dot);
    for (int j = lane; j <= t; j += 32) {
        float a = ld(att, attDt, base + j);
        float g = scale * a * (ld(datt, dattDt, base + j) - dot);
        st(dpreatt, dDt, base + j, ld(dpreatt, dDt, base + j) + g);
    }
}
