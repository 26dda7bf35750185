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
// Right at every input: FloatExp clamps E to [e^−87, e^88], so past the clamp these formulas kept
// a factor that should vanish (GELU'(1e12) was 1.0035, GELU(−3e38) −1.82, GELU(−∞) −∞). Below
// x = TAIL, where 1 + E is E in fp32, the GELU is x·e^(2u) and GELU' is (1 + 2x·u')·e^(2u), with
// e^(2u) = e^(2u + 64)·e^−64 from the same single exp (its argument selected per lane); below
// ZERO both round to −0, and above ONE GELU' rounds to 1 (as the formula gave up to x ≈ 2e10, so
// ordinary inputs keep their bits). Those lanes are rare: a vector blends them in only when it
// has one, so the common path pays a compare and a predicted branch.
//
// Each loop is a method of its own, compiled alone (@CompiledAlone, JitDirectives), so that C2
// inlines every vector op of it; the exp goes through Simd.expInPlace (see there why it is not a
// vector method called per vector).
package org.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;

final class Gelu {

    private static final float SCALE = (float) Math.sqrt(2.0 / Math.PI);
    private static final float CUBIC = 0.044715f;
    private static final float CUBIC3 = 3f * CUBIC;   // folded by javac in fp32, as the scalar form was

    /** Below this x, −2u > 87: the tail forms (E = e^87.3 at −10, so 1 + E is E). */
    static final float TAIL = -10f;
    /** Below this x, GELU and GELU' are below 1e-60: −0 (and the tail's exp would clamp). */
    static final float ZERO = -12f;
    /** Above this x, GELU' is 1 in fp32 (and ∞, whose formula gives ∞·0, must give 1 too). */
    static final float ONE = 10f;   // = −TAIL, so one |x| > ONE test finds both kinds of rare lanes
    private static final float C = FloatExp.EXP_MINUS_TAIL_SHIFT;

    private Gelu() {
    }

    /** x[off .. off+n) = GELU(x); e[0 .. n) is scratch. */
    static void forwardInPlace(float[] x, int off, int n, float[] e) {
        minusTwoArg(x, off, e, n);
        Simd.expInPlace(e, 0, n);
        fromExp(x, off, e, n);
    }

    /**
     * d[dOff + i] += GELU'(x[xOff + i]) · g[gOff + i] for i in [0, n), with GELU'(v) = σ + 2v·E·σ²·u'(v),
     * σ = 1 / (1 + E); es[0 .. n) is scratch.
     */
    static void backward(float[] d, int dOff, float[] x, int xOff, float[] g, int gOff, int n, float[] es) {
        minusTwoArg(x, xOff, es, n);
        Simd.expInPlace(es, 0, n);
        gradient(d, dOff, x, xOff, g, gOff, n, es);
    }

    /** out[0 .. n) = the exp's argument at x[off ..]: a = −2u, or 64 − a (= 2u + 64) below TAIL. */
    @CompiledAlone
    private static void minusTwoArg(float[] x, int off, float[] out, int n) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, off + i);
            FloatVector a = v.mul(CUBIC).mul(v).mul(v).add(v).mul(SCALE).mul(-2f);
            VectorMask<Float> tail = v.lt(TAIL);
            if (tail.anyTrue()) {
                a = a.blend(a.neg().add(FloatExp.TAIL_SHIFT), tail);
            }
            a.intoArray(out, i);
        }
        for (; i < n; i++) {
            float v = x[off + i];
            float a = -2f * (SCALE * (v + CUBIC * v * v * v));
            out[i] = v < TAIL ? FloatExp.TAIL_SHIFT - a : a;
        }
    }

    /** x[off + i] = GELU(x) given e[i], the exp of minusTwoArg's argument: x / (1 + E), or the tails. */
    @CompiledAlone
    private static void fromExp(float[] x, int off, float[] e, int n) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, off + i);
            FloatVector ev = FloatVector.fromArray(Simd.F, e, i);
            FloatVector y = v.div(ev.add(1f));
            VectorMask<Float> tail = v.lt(TAIL);
            if (tail.anyTrue()) {
                y = y.blend(v.mul(ev).mul(C), tail).blend(-0f, v.lt(ZERO));
            }
            y.intoArray(x, off + i);
        }
        for (; i < n; i++) {
            float v = x[off + i];
            float y = v < TAIL ? v * e[i] * C : v / (1f + e[i]);
            x[off + i] = v < ZERO ? -0f : y;
        }
    }

    /** backward's last pass, given es[i] = the exp of minusTwoArg's argument at x[xOff + i]. */
    @CompiledAlone
    private static void gradient(float[] d, int dOff, float[] x, int xOff, float[] g, int gOff, int n, float[] es) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, xOff + i);
            FloatVector e = FloatVector.fromArray(Simd.F, es, i);
            FloatVector s = FloatVector.broadcast(Simd.F, 1f).div(e.add(1f));
            FloatVector du = v.mul(CUBIC3).mul(v).add(1f).mul(SCALE);
            FloatVector local = v.mul(2f).mul(e.mul(s)).mul(s).mul(du).add(s);
            if (v.abs().compare(VectorOperators.GT, ONE).anyTrue()) {   // |x| > 10: below TAIL or above ONE
                local = local.blend(v.mul(2f).mul(du).add(1f).mul(e).mul(C), v.lt(TAIL))
                        .blend(1f, v.compare(VectorOperators.GT, ONE)).blend(-0f, v.lt(ZERO));
            }
            FloatVector.fromArray(Simd.F, d, dOff + i).add(local.mul(FloatVector.fromArray(Simd.F, g, gOff + i))).intoArray(d, dOff + i);
        }
        for (; i < n; i++) {
            float v = x[xOff + i];
            float e = es[i];
            float s = 1f / (1f + e);
            float du = SCALE * (1f + CUBIC3 * v * v);
            float local = v > ONE ? 1f
                    : v < ZERO ? -0f
                    : v < TAIL ? (1f + 2f * v * du) * e * C
                    : s + 2f * v * (e * s) * s * du;
            d[dOff + i] += local * g[gOff + i];
        }
    }
}
