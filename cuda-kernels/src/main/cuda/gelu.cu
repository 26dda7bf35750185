// GELU, GPT-2's tanh approximation, forward and backward (the backward accumulates), in the CPU
// backend's form (ElementwiseOps): ½x(1 + tanh u) = x·σ(2u) = x / (1 + E) with E = e^(−2u), the
// exponent clamped to [−87, 88] as FloatExp clamps it. The same function, but 1 + tanh u never
// cancels for negative x, the derivative needs no 1 − tanh² (which overflowed x² turned into
// 0·∞ = NaN for |x| > 5e19), and −∞ gives −∞/e^88 instead of −∞·0 = NaN.
#include "common.cuh"

#define GELU_SCALE 0.7978845608028654f   // sqrt(2/pi)
#define GELU_CUBIC 0.044715f

// u = √(2/π)(x + 0.044715x³), the tanh argument.
static __device__ __forceinline__ float gelu_arg(float x) {
    return GELU_SCALE * (x + GELU_CUBIC * x * x * x);
}

// e^(−2u) with the exponent clamped as FloatExp.exp clamps it.
static __device__ __forceinline__ float gelu_exp(float x) {
    return exp_clamped(-2.f * gelu_arg(x));
}

// out (n) = GELU(inp (n)).
extern "C" __global__ void gelu_forward_kernel(const void* inp, int inpDt, void* out, int outDt, long long n) {
    GRID_STRIDE(i, n) {
        float x = ld(inp, inpDt, i);
        st(out, outDt, i, x / (1.f + gelu_exp(x)));
    }
}

// dinp (n) += GELU'(inp) · dout, with GELU'(x) = σ + 2x·E·σ²·u'(x) for σ = 1 / (1 + E).
extern "C" __global__ void gelu_backward_kernel(const void* inp, int inpDt, const void* dout, int doutDt,
                                                void* dinp, int dinpDt, long long n) {
    GRID_STRIDE(i, n) {
        float x = ld(inp, inpDt, i);
        float e = gelu_exp(x);
        float s = 1.f / (1.f + e);
        float du = GELU_SCALE * (1.f + 3.f * GELU_CUBIC * x * x);
        float grad = s + 2.f * x * (e * s) * s * du;
        st(dinp, dinpDt, i, ld(dinp, dinpDt, i) + grad * ld(dout, doutDt, i));
    }
}
