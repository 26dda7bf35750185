// Token embeddings, plus learned position embeddings where the model has them (wpe non-null). The backward is deterministic without atomics on floats: each
// vocabulary row is owned by one block, which finds the positions holding its token in
// ascending order and sums their gradients in that order (the CPU backend's order).
#include "common.cuh"

#define EMB_THREADS 256

// out (B·T, C) = wte[tokens[bt]] + wpe[bt mod T] (wpe null: wte[tokens[bt]]); a token outside
// [0, V) gives NaN.
extern "C" __global__ void embedding_forward_kernel(const int* tokens, const void* wte, int wteDt,
                                                    const void* wpe, int wpeDt, void* out, int outDt,
                                                    long long BT, int T, int C, int V) {
    GRID_STRIDE(i, BT * C) {
        long long bt = i / C;
        int c = i % C;
        int t = bt % T;
        int tok = tokens[bt];
        float val = NAN;
        if (tok >= 0 && tok < V) {
            val = ld(wte, wteDt, (long long)tok * C + c);
            if (wpe != nullptr) val += ld(wpe, wpeDt, (long long)t * C + c);
        }
        st(out, outDt, i, val);
    }
}

// dwpe (T, C) += Σ_b dout (B, T, C), b in order.
extern "C" __global__ void embedding_backward_wpe_kernel(const void* dout, int doutDt, void* dwpe, int dwpeDt,
                                                         int B, int T, int C) {
    long long TC = (long long)T * C;
    GRID_STRIDE(i, TC) {
        float s = 0.f;
        for (int b = 0; b < B; b++) s += ld(dout, doutDt, b * TC + i);
        st(dwpe, dwpeDt, i, ld(dwpe, dwpeDt, i) + s);
    }
}

// present (V) |= tokens seen; the launcher zeroes it first. Same value from every writer.
extern "C" __global__ void embedding_mark_kernel(const int* tokens, long long BT, int V, int* present) {
    GRID_STRIDE(i, BT) {
        int tok = tokens[i];
        if (tok >= 0 && tok < V) present[tok] = 1;
    }
}

// dwte[v] (C) += Σ dout[p] over the positions p with tokens[p] == v, in ascending p.
// Block EMB_THREADS, grid V; blocks of absent tokens return at once.
extern "C" __global__ void embedding_backward_wte_kernel(const int* tokens, const int* present, const void* dout,
                                                         int doutDt, void* dwte, int dwteDt, long long BT, int C) {
    __shared__ long long matches[EMB_THREADS];
    __shared__ int warpHits[EMB_THREADS / 32];
    int v = blockIdx.x;
    if (!present[v]) return;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int c0 = 0; c0 < C; c0 += EMB_THREADS) {
        int c = c0 + threadIdx.x;
        float acc = 0.f;
        for (long long p0 = 0; p0 < BT; p0 += EMB_THREADS) {
            long long p = p0 + threadIdx.x;
            bool hit = p < BT && tokens[p] == v;
            unsigned mask = __ballot_sync(0xffffffffu, hit);
            if (lane == 0) warpHits[warp] = __popc(mask);
            __syncthreads();
            int before = 0, total = 0;
            for (int w = 0; w < EMB_THREADS / 32; w++) {
                before += w < warp ? warpHits[w] : 0;
                total += warpHits[w];
            }
            if (hit) matches[before + __popc(mask & ((1u << lane) - 1u))] = p;   // compacted, in order
            __syncthreads();
            if (c < C) {
                for (int k = 0; k < total; k++) acc += ld(dout, doutDt, matches[k] * C + c);
            }
            __syncthreads();
        }
        if (c < C) {
            long long o = (long long)v * C + c;
            st(dwte, dwteDt, o, ld(dwte, dwteDt, o) + acc);
        }
    }
}
