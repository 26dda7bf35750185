// Optimizer steps on flat fp32 buffers (the master shard): AdamW and SGD with momentum.
// The bias corrections 1 − β^t are computed once on the host per step.
#include "common.cuh"

// param, m, v (n) F32; grad (n) any float dtype.
extern "C" __global__ void adamw_kernel(float* param, const void* grad, int gradDt, float* m, float* v,
                                        long long n, float lr, float beta1, float beta2, float eps,
                                        float weightDecay, float gradScale, float biasCorrection1,
                                        float biasCorrection2) {
    GRID_STRIDE(i, n) {
        float g = gradScale * ld(grad, gradDt, i);
        float mi = beta1 * m[i] + (1.f - beta1) * g;
        float vi = beta2 * v[i] + (1.f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mHat = mi / biasCorrection1;
        float vHat = vi / biasCorrection2;
        float p = param[i];
        param[i] = p - lr * (mHat / (sqrtf(vHat) + eps) + weightDecay * p);
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
