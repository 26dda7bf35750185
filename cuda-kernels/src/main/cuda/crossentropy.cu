// Softmax cross-entropy over the vocabulary, one block per row. A target outside [0, V)
// gives a NaN loss rather than an out-of-bounds read, so a bad batch shows up in the loss.
#include "common.cuh"

// Row n's max and Σ exp(x − max) over the vocabulary, reduced across the block (every thread
// of the block must call it; every thread gets both values).
static __device__ float2 row_max_sumexp(const void* logits, int dt, long long base, int V) {
    float m = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, ld(logits, dt, base + j));
    m = block_max(m);
    float s = 0.f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(ld(logits, dt, base + j) - m);
    return make_float2(m, block_sum(s));
}

// losses (N) F32 = logsumexp(logits[n]) − logits[n, targets[n]]. Block: whole warps covering V, at
// most 512 (CrossEntropyLauncher.threads); grid N.
extern "C" __global__ void cross_entropy_forward_kernel(const void* logits, int dt, const int* targets,
                                                        float* losses, long long N, int V) {
    long long n = blockIdx.x;
    if (n >= N) return;
    long long base = n * V;
    float2 ms = row_max_sumexp(logits, dt, base, V);
    float m = ms.x, s = ms.y;
    if (threadIdx.x == 0) {
        int y = targets[n];
        losses[n] = (y >= 0 && y < V) ? logf(s) + m - ld(logits, dt, base + y) : NAN;
    }
}

// dlogits (N, V) = (softmax(logits) − onehot(targets)) · dloss, overwritten. dlogits may be
// logits: every read of the row finishes (block reductions end in a barrier) before a write,
// and each element is then read and written by the same thread.
extern "C" __global__ void cross_entropy_backward_kernel(const void* logits, int dt, const int* targets, float dloss,
                                                         void* dlogits, int dDt, long long N, int V) {
    long long n = blockIdx.x;
    if (n >= N) return;
    long long base = n * V;
    float2 ms = row_max_sumexp(logits, dt, base, V);
    float m = ms.x, inv = 1.f / ms.y;
    int y = targets[n];
    bool valid = y >= 0 && y < V;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float p = expf(ld(logits, dt, base + j) - m) * inv;
        float g = valid ? (p - (j == y ? 1.f : 0.f)) * dloss : NAN;
        st(dlogits, dDt, base + j, g);
    }
}
