// GELU, GPT-2's tanh approximation, forward and backward (the backward accumulates).
#include "common.cuh"

#define GELU_SCALE 0.7978845608028654f   // sqrt(2/pi)
#define GELU_CUBIC 0.044715f

// out (n) = GELU(inp (n)).
extern "C" __global__ void gelu_forward_kernel(const void* inp, int inpDt, void* out, int outDt, long long n) {
    GRID_STRIDE(i, n) {
        float x = ld(inp, inpDt, i);
        float y = 0.5f * x * (1.f + tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x)));
        st(out, outDt, i, y);
    }
}

// dinp (n) += GELU'(inp) · dout.
extern "C" __global__ void gelu_backward_kernel(const void* inp, int inpDt, const void* dout, int doutDt,
                                                void* dinp, int dinpDt, long long n) {
    GRID_STRIDE(i, n) {
        float x = ld(inp, inpDt, i);
        float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.f - th * th;
        float grad = 0.5f * (1.f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.f + 3.f * GELU_CUBIC * x * x);
        st(dinp, dinpDt, i, ld(dinp, dinpDt, i) + grad * ld(dout, doutDt, i));
    }
}
