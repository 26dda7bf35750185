// Token embeddings, plus learned position embeddings where the model has them (wpe non-null). The
// dwte backward is deterministic without atomics on floats and costs O(B·T·C + V), whatever the
// vocabulary: the positions are grouped by token once per step (integer counts, a prefix sum over
// V, a stable placement in position order), then each vocabulary row present in the batch sums its
// own positions' gradients in ascending order (the CPU backend's order).
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

// counts (V+1) I32, zeroed by the launcher: counts[v + 1] += 1 per position holding token v
// (integer atomics, so the totals do not depend on the order); invalid tokens are skipped.
extern "C" __global__ void embedding_count_kernel(const int* tokens, long long BT, int V, int* counts) {
    GRID_STRIDE(i, BT) {
        int tok = tokens[i];
        if (tok >= 0 && tok < V) atomicAdd(&counts[tok + 1], 1);
    }
}

// counts (n = V+1) becomes its inclusive prefix sum, so counts[v] is token v's first slot in the
// grouped order and counts[V] the number of valid positions; cursor (V) gets a copy of the first
// V. One block of EMB_THREADS: each thread scans a contiguous slice (O(V) work in all).
extern "C" __global__ void embedding_scan_kernel(int* counts, int n, int* cursor) {
    __shared__ int partial[EMB_THREADS];
    int per = (n + EMB_THREADS - 1) / EMB_THREADS;
    long long lo0 = (long long)threadIdx.x * per;
    int lo = lo0 < n ? (int)lo0 : n;
    int hi = n - lo < per ? n : lo + per;
    int s = 0;
    for (int i = lo; i < hi; i++) s += counts[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {   // exclusive scan of the EMB_THREADS slice totals
        int run = 0;
        for (int w = 0; w < EMB_THREADS; w++) {
            int total = partial[w];
            partial[w] = run;
            run += total;
        }
    }
    __syncthreads();
    int run = partial[threadIdx.x];
    for (int i = lo; i < hi; i++) {
        run += counts[i];
        counts[i] = run;
        if (i < n - 1) cursor[i] = run;
    }
}

// order (valid positions) = the positions grouped by token, each group in ascending position: a
// stable counting-sort placement. One block of EMB_THREADS walks the positions a tile at a time
// (tiles in order keep the groups in order); a position's slot is its token's cursor plus the
// number of earlier positions of the tile with the same token, and the last such position of the
// tile moves the cursor on. O(B·T·EMB_THREADS) comparisons, in shared memory.
extern "C" __global__ void embedding_group_kernel(const int* tokens, long long BT, int V, int* cursor,
                                                  int* order) {
    __shared__ int tile[EMB_THREADS];
    for (long long p0 = 0; p0 < BT; p0 += EMB_THREADS) {
        long long p = p0 + threadIdx.x;
        int n = BT - p0 < EMB_THREADS ? (int)(BT - p0) : EMB_THREADS;
        int tok = p < BT ? tokens[p] : -1;
        bool valid = tok >= 0 && tok < V;
        tile[threadIdx.x] = valid ? tok : -1;
        __syncthreads();
        int before = 0;
        bool last = true;
        if (valid) {
            for (int j = 0; j < n; j++) {
                if (tile[j] == tok) {
                    before += j < (int)threadIdx.x;
                    last = last && j <= (int)threadIdx.x;
                }
            }
            order[cursor[tok] + before] = (int)p;
        }
        __syncthreads();   // every position of the tile has read its cursor before one moves
        if (valid && last) cursor[tok] += before + 1;
        __syncthreads();   // the cursors moved and the tile read before the next tile overwrites it
    }
}

// dwte[v] (C) += Σ dout[p] over token v's positions (order[start[v] .. start[v+1]), ascending p).
// Block EMB_THREADS, grid V; the blocks of tokens absent from the batch return at once.
extern "C" __global__ void embedding_backward_wte_kernel(const int* start, const int* order, const void* dout,
                                                         int doutDt, void* dwte, int dwteDt, int C) {
    int v = blockIdx.x;
    int lo = start[v], hi = start[v + 1];
    if (lo == hi) return;
    for (int c = threadIdx.x; c < C; c += EMB_THREADS) {
        float acc = 0.f;
        for (int k = lo; k < hi; k++) acc += ld(dout, doutDt, (long long)order[k] * C + c);
        long long o = (long long)v * C + c;
        st(dwte, dwteDt, o, ld(dwte, dwteDt, o) + acc);
    }
}
