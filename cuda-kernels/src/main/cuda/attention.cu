// Attention plumbing around the two batched GEMMs: head split/merge (and their backward,
// which accumulate; the split takes fewer key/value heads than query heads for grouped-query
// attention) and the causal softmax over (BH, T, T) scores, one warp per row.
#include "common.cuh"

// Where element col of a token's fused qkv row, laid out [q (H·D) | k (Hkv·D) | v (Hkv·D)], sits in
// its head-major tensor: part 0 q (B, H, T, D), 1 k and 2 v (B, Hkv, T, D); returns the element index.
static __device__ __forceinline__ long long qkv_head_index(long long b, int t, int col, int T, int H, int Hkv, int D,
                                                           int* part) {
    int heads = H;
    *part = 0;
    if (col >= H * D) {
        col -= H * D;
        heads = Hkv;
        *part = 1;
        if (col >= Hkv * D) {
            col -= Hkv * D;
            *part = 2;
        }
    }
    int h = col / D, d = col % D;
    return ((b * heads + h) * T + t) * D + d;
}

// The four head copies below walk the (B·T, row) matrix of the token-major side row by row
// (FOR_ROWS, common.cuh): a row's b and t are found once per row and a column's head and offset in
// 32-bit arithmetic. One flat index per element, split by 64-bit divisions, made these copies
// compute-bound (0.5 ms a call at 1B on an H200, 8x what their bytes take).

// q (B, H, T, D), k, v (B, Hkv, T, D) = qkv (B, T, (H + 2·Hkv)·D) laid out [q | k | v] per token
// (Hkv = H: multi-head attention; fewer: grouped-query). One thread per qkv element.
extern "C" __global__ void split_heads_kernel(const void* qkv, int qkvDt, void* q, void* k, void* v, int outDt,
                                              int B, int T, int H, int Hkv, int D) {
    int W = (H + 2 * Hkv) * D;
    FOR_ROWS(bt, (long long)B * T) {
        long long b = bt / T;
        int t = (int)(bt - b * T);
        FOR_ROW_COLS(j, W) {
            int part;
            long long at = qkv_head_index(b, t, j, T, H, Hkv, D, &part);
            st(part == 0 ? q : (part == 1 ? k : v), outDt, at, ld(qkv, qkvDt, bt * W + j));
        }
    }
}

// dqkv (B, T, (H + 2·Hkv)·D) += dq (B, H, T, D) | dk | dv (B, Hkv, T, D), one thread per dqkv
// element (no races).
extern "C" __global__ void split_heads_backward_kernel(const void* dq, const void* dk, const void* dv, int inDt,
                                                       void* dqkv, int dqkvDt, int B, int T, int H, int Hkv, int D) {
    int W = (H + 2 * Hkv) * D;
    FOR_ROWS(bt, (long long)B * T) {
        long long b = bt / T;
        int t = (int)(bt - b * T);
        FOR_ROW_COLS(j, W) {
            int part;
            long long at = qkv_head_index(b, t, j, T, H, Hkv, D, &part);
            const void* g = part == 0 ? dq : (part == 1 ? dk : dv);
            long long i = bt * W + j;
            st(dqkv, dqkvDt, i, ld(dqkv, dqkvDt, i) + ld(g, inDt, at));
        }
    }
}

// out (B, T, H·D) = y (B, H, T, D) with the heads side by side.
extern "C" __global__ void merge_heads_kernel(const void* y, int yDt, void* out, int outDt, int B, int T, int H, int D) {
    int C = H * D;
    FOR_ROWS(bt, (long long)B * T) {
        long long b = bt / T;
        int t = (int)(bt - b * T);
        FOR_ROW_COLS(c, C) {
            int h = c / D, d = c - h * D;
            st(out, outDt, bt * C + c, ld(y, yDt, ((b * H + h) * T + t) * D + d));
        }
    }
}

// dy (B, H, T, D) += dout (B, T, H·D) rearranged; one thread per dout element, each dy element
// reached by exactly one (no races).
extern "C" __global__ void merge_heads_backward_kernel(const void* dout, int doutDt, void* dy, int dyDt,
                                                       int B, int T, int H, int D) {
    int C = H * D;
    FOR_ROWS(bt, (long long)B * T) {
        long long b = bt / T;
        int t = (int)(bt - b * T);
        FOR_ROW_COLS(c, C) {
            int h = c / D, d = c - h * D;
            long long i = ((b * H + h) * T + t) * D + d;
            st(dy, dyDt, i, ld(dy, dyDt, i) + ld(dout, doutDt, bt * C + c));
        }
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
