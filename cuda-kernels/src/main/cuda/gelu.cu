// GELU, GPT-2's tanh approximation, forward and backward (the backward accumulates), in the CPU
// backend's form (Gelu): ½x(1 + tanh u) = x·σ(2u) = x / (1 + E) with E = e^(−2u), the exponent
// clamped to [−87, 88] as FloatExp clamps it. The same function, but 1 + tanh u never cancels for
// negative x and the derivative needs no 1 − tanh². Past the clamp the formula would keep a factor
// that should vanish (GELU'(1e12) = 1.0035, GELU(−3e38) = −1.82), so below x = −10, where 1 + E is
// E, GELU = x·e^(2u) and GELU' = (1 + 2x·u')·e^(2u), with e^(2u) = e^(2u + 64)·e^−64 from the one
// exp; below −12 both are −0, and above 10 GELU' is 1 (∞ included).
#include "common.cuh"

#define GELU_SCALE 0.7978845608028654f   // sqrt(2/pi)
#define GELU_CUBIC 0.044715f
#define GELU_TAIL -10.f   // below: the tail forms (−2u > 87)
#define GELU_ZERO -12.f   // below: GELU and GELU' are under 1e-60, −0
#define GELU_ONE 10.f     // above: GELU' is 1 in fp32

// u = √(2/π)(x + 0.044715x³), the tanh argument.
static __device__ __forceinline__ float gelu_arg(float x) {
    return GELU_SCALE * (x + GELU_CUBIC * x * x * x);
}

// E = e^(−2u), or e^(2u + 64) below GELU_TAIL (as 64 − (−2u)), the exponent clamped as FloatExp.exp clamps it.
static __device__ __forceinline__ float gelu_exp(float x) {
    float a = -2.f * gelu_arg(x);
    return exp_clamped(x < GELU_TAIL ? TAIL_SHIFT - a : a);
}

// out (n) = GELU(inp (n)).
extern "C" __global__ void gelu_forward_kernel(const void* inp, int inpDt, void* out, int outDt, long long n) {
    GRID_STRIDE(i, n) {
        float x = ld(inp, inpDt, i);
        float e = gelu_exp(x);
        float y = x < GELU_TAIL ? x * e * EXP_MINUS_TAIL_SHIFT : x / (1.f + e);
        st(out, outDt, i, x < GELU_ZERO ? -0.f : y);
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
        float grad = x > GELU_ONE ? 1.f
                   : x < GELU_ZERO ? -0.f
                   : x < GELU_TAIL ? (1.f + 2.f * x * du) * e * EXP_MINUS_TAIL_SHIFT
                   : s + 2.f * x * (e * s) * s * du;
        st(dinp, dinpDt, i, ld(dinp, dinpDt, i) + grad * ld(dout, doutDt, i));
    }
}
