// Optimizer steps on flat fp32 buffers (the master shard): AdamW and SGD with momentum.
// The bias corrections 1 − β^t are folded into scalars once per step on the host.
#include "common.cuh"

// param, m, v (n) F32; grad (n) any float dtype. PyTorch's arrangement of the same update:
// p = p·(1 − lr·wd) − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps).
extern "C" __global__ void adamw_kernel(float* param, const void* grad, int gradDt, float* m, float* v,
                                        long long n, float beta1, float beta2, float eps, float gradScale,
                                        float stepSize, float biasCorrection2Sqrt, float decay) {
    GRID_STRIDE(i, n) {
        float g = gradScale * ld(grad, gradDt, i);
        float mi = beta1 * m[i] + (1.f - beta1) * g;
        float vi = beta2 * v[i] + (1.f - beta2) * (g * g);
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / biasCorrection2Sqrt + eps;
        param[i] = param[i] * decay - stepSize * (mi / denom);
    }
}

// param, buf (n) F32: g = gradScale·grad + wd·p; buf = momentum·buf + g; p −= lr·buf.
extern "C" __global__ void sgd_momentum_kernel(float* param, const void* grad, int gradDt, float* buf, long long n,
                                               float lr, float momentum, float weightDecay, float gradScale) {
    GRID_STRIDE(i, n) {
        float p = param[i];
        float g = gradScale * ld(grad, gradDt, i) + weightDecay * p;
        float b = momentum * buf[i] + g;
        buf[i] = b;
        param[i] = p - lr * b;
    }
}
