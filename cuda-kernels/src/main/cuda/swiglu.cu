// SwiGLU's gated unit (Shazeer 2020; Llama's MLP): out = SiLU(gate) · up, SiLU(g) = g·σ(g) =
// g / (1 + e^(−g)), the exponent clamped as the CPU backend's FloatExp clamps it (exp_clamped),
// in the CPU twin's order (ElementwiseOps). The backward accumulates into both gradients.
#include "common.cuh"

// out (n) = SiLU(gate (n)) · up (n); out may alias gate or up.
extern "C" __global__ void swiglu_forward_kernel(const void* gate, int gateDt, const void* up, int upDt,
                                                 void* out, int outDt, long long n) {
    GRID_STRIDE(i, n) {
        float g = ld(gate, gateDt, i);
        float u = ld(up, upDt, i);
        st(out, outDt, i, g / (1.f + exp_clamped(-g)) * u);
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
        float s = 1.f / (1.f + exp_clamped(-g));
        float silu = g * s;
        st(dgate, dgateDt, i, ld(dgate, dgateDt, i) + d * u * (s * (1.f + g * (1.f - s))));
        st(dup, dupDt, i, ld(dup, dupDt, i) + d * silu);
    }
}
