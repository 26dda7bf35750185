// SwiGLU's gated unit (Shazeer 2020; Llama's MLP): out = SiLU(gate) · up, SiLU(g) = g·σ(g) =
// g / (1 + e^(−g)), the exponent clamped as the CPU backend's FloatExp clamps it (exp_clamped),
// in the CPU twin's order (ElementwiseOps). The backward accumulates into both gradients. The clamp
// kept σ(g) ≥ e^−88 (SiLU(−3e38) = −1.82, SiLU(−∞) = −∞) and made SiLU'(+∞) ∞·0, so below
// g = −80, where 1 + e^(−g) is e^(−g), SiLU = g·e^g and SiLU' = (1 + g)·e^g, with
// e^g = e^(g + 64)·e^−64 from the one exp; below −151 both are −0, and above 80 SiLU' is 1.
#include "common.cuh"

#define SILU_TAIL -80.f    // below: the tail forms
#define SILU_ZERO -151.f   // below: g + 64 is past the clamp, and SiLU, SiLU' are under 1e-63: −0
#define SILU_ONE 80.f      // above: SiLU' is 1 in fp32

// e^(−g), or e^(g + 64) below SILU_TAIL.
static __device__ __forceinline__ float silu_exp(float g) {
    return exp_clamped(g < SILU_TAIL ? g + TAIL_SHIFT : -g);
}

// out (n) = SiLU(gate (n)) · up (n); out may alias gate or up.
extern "C" __global__ void swiglu_forward_kernel(const void* gate, int gateDt, const void* up, int upDt,
                                                 void* out, int outDt, long long n) {
    GRID_STRIDE(i, n) {
        float g = ld(gate, gateDt, i);
        float u = ld(up, upDt, i);
        float e = silu_exp(g);
        float silu = g < SILU_ZERO ? -0.f : g < SILU_TAIL ? g * e * EXP_MINUS_TAIL_SHIFT : g / (1.f + e);
        st(out, outDt, i, silu * u);
    }
}

// dgate (n) += dout · up · σ(g)(1 + g(1 − σ(g))); dup (n) += dout · SiLU(g).
extern "C" __global__ void swiglu_backward_kernel(const void* gate, int gateDt, const void* up, int upDt,
                                                  const void* dout, int doutDt, void* dgate, int dgateDt,
                                                  void* dup, int dupDt, long long n) {
    GRID_STRIDE(i, n) {
        float g = ld(gate, gateDt, i);
        float u = ld(up, upDt, i);
        float d = ld(dout, doutDt, i);
        float e = silu_exp(g);
        float s = 1.f / (1.f + e);
        float silu = g < SILU_ZERO ? -0.f : g < SILU_TAIL ? g * e * EXP_MINUS_TAIL_SHIFT : g * s;
        float slope = g > SILU_ONE ? 1.f
                    : g < SILU_ZERO ? -0.f
                    : g < SILU_TAIL ? (1.f + g) * e * EXP_MINUS_TAIL_SHIFT
                    : s * (1.f + g * (1.f - s));
        st(dgate, dgateDt, i, ld(dgate, dgateDt, i) + d * u * slope);
        st(dup, dupDt, i, ld(dup, dupDt, i) + d * silu);
    }
}
