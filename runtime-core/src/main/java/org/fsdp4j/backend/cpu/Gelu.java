// The GELU (tanh approximation, as GPT-2) and its gradient over runs of float[], shared by the
// pointwise ops (ElementwiseOps.geluForward/geluBackward, on chunks loaded into scratch) and by
// PanelGemm's fused stores (GemmEpilogue: the GELU applied to a block of C while it is in cache).
// Both callers run the same lane operations in the same order, so an element's bits do not depend
// on which of them computed it, nor on where its run starts (the scalar tails match the lanes).
//
// GELU(v) = ½v(1 + tanh u) with u = √(2/π)(v + 0.044715v³), written as v·σ(2u) = v / (1 + E) with
// E = exp(−2u): the same function, but 1 + tanh u never cancels for negative u, and one fp32 exp
// serves both tanh and its derivative (σ'(2u) = E·σ², no 1 − tanh² cancellation either).
//
// Each loop is a method of its own, compiled alone (@CompiledAlone, JitDirectives), so that C2
// inlines every vector op of it; the exp goes through Simd.expInPlace (see there why it is not a
// vector method called per vector).
package org.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;

final class Gelu {

    private static final float SCALE = (float) Math.sqrt(2.0 / Math.PI);
    private static final float CUBIC = 0.044715f;
    private static final float CUBIC3 = 3f * CUBIC;   // folded by javac in fp32, as the scalar form was

    private Gelu() {
    }

    /** x[off .. off+n) = GELU(x); e[0 .. n) is scratch. */
    static void forwardInPlace(float[] x, int off, int n, float[] e) {
        minusTwoArg(x, off, e, n);
        Simd.expInPlace(e, 0, n);
        divideByOnePlus(x, off, e, n);
    }

    /**
     * d[dOff + i] += GELU'(x[xOff + i]) · g[gOff + i] for i in [0, n), with GELU'(v) = σ + 2v·E·σ²·u'(v),
     * σ = 1 / (1 + E); es[0 .. n) is scratch.
     */
    static void backward(float[] d, int dOff, float[] x, int xOff, float[] g, int gOff, int n, float[] es) {
        minusTwoArg(x, xOff, es, n);
        Simd.expInPlace(es, 0, n);   // clamped, so e·σ² below is never ∞·0
        gradient(d, dOff, x, xOff, g, gOff, n, es);
    }

    /** out[0 .. n) = −2·u(x[off ..]), the exp's argument. */
    @CompiledAlone
    private static void minusTwoArg(float[] x, int off, float[] out, int n) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, off + i);
            v.mul(CUBIC).mul(v).mul(v).add(v).mul(SCALE).mul(-2f).intoArray(out, i);
        }
        for (; i < n; i++) {
            float v = x[off + i];
            out[i] = -2f * (SCALE * (v + CUBIC * v * v * v));
        }
    }

    /** x[off + i] /= 1 + e[i]. */
    @CompiledAlone
    private static void divideByOnePlus(float[] x, int off, float[] e, int n) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, off + i);
            v.div(FloatVector.fromArray(Simd.F, e, i).add(1f)).intoArray(x, off + i);
        }
        for (; i < n; i++) {
            x[off + i] = x[off + i] / (1f + e[i]);
        }
    }

    /** backward's last pass, given es[i] = E at x[xOff + i]. */
    @CompiledAlone
    private static void gradient(float[] d, int dOff, float[] x, int xOff, float[] g, int gOff, int n, float[] es) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, xOff + i);
            FloatVector e = FloatVector.fromArray(Simd.F, es, i);
            FloatVector s = FloatVector.broadcast(Simd.F, 1f).div(e.add(1f));
            FloatVector du = v.mul(CUBIC3).mul(v).add(1f).mul(SCALE);
            FloatVector local = v.mul(2f).mul(e.mul(s)).mul(s).mul(du).add(s);
            FloatVector.fromArray(Simd.F, d, dOff + i).add(local.mul(FloatVector.fromArray(Simd.F, g, gOff + i))).intoArray(d, dOff + i);
        }
        for (; i < n; i++) {
            float v = x[xOff + i];
            float e = es[i];
            float s = 1f / (1f + e);
            float du = SCALE * (1f + CUBIC3 * v * v);
            float local = s + 2f * v * (e * s) * s * du;
            d[dOff + i] += local * g[gOff + i];
        }
    }
}
