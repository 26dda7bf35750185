// The CPU backend's pointwise ops (fill, cast-copy, add, scale, bias, GELU, SwiGLU): chunks of
// elements or rows are loaded into fp32 scratch, computed with the Vector API (Simd: the same
// bits as the scalar tail loops, lane by lane), and rounded back on store.
package org.fsdp4j.backend.cpu;

import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;

final class ElementwiseOps {

    /** Elements per chunk of a pointwise loop: big enough to amortise a task, small enough for L2. */
    static final long GRAIN = 1 << 14;

    private ElementwiseOps() {
    }

    /** Bytes per chunk of a zero fill (a native memset per chunk). */
    private static final long ZERO_GRAIN_BYTES = 1 << 20;

    static void fill(CpuThreads threads, Tensor t, float value) {
        if (Float.floatToRawIntBits(value) == 0) {
            zero(threads, t);   // +0 has all bits clear in every dtype (fp32, fp16, bf16, int32)
            return;
        }
        Elements e = Elements.of(t);
        if (t.dtype() == DType.I32) {
            int v = (int) value;
            threads.forChunks(t.numel(), GRAIN, (c, from, to) -> {
                int n = (int) (to - from);
                int[] buf = Scratch.ints(n);
                Arrays.fill(buf, 0, n, v);
                e.storeInts(buf, 0, from, n);
            });
            return;
        }
        threads.forChunks(t.numel(), GRAIN, (c, from, to) -> {
            int n = (int) (to - from);
            float[] buf = Scratch.floats(0, n);
            Arrays.fill(buf, 0, n, value);
            e.store(buf, 0, from, n);
        });
    }

    /** t = 0, a native memset per chunk (+0 is all bits clear in every dtype, so no zeroed float[] to stage). */
    private static void zero(CpuThreads threads, Tensor t) {
        threads.checkOpen();
        BytePointer base = CpuStorage.of(t).pointer();
        long start = t.byteOffset();
        threads.forChunks(t.numBytes(), ZERO_GRAIN_BYTES, (c, from, to) -> {
            Pointer.memset(new BytePointer(base).position(start + from), 0, to - from);
        });
    }

    /** dst = src; a byte move when the dtypes match (overlap-safe), else a rounding cast. */
    static void copy(CpuThreads threads, Tensor src, Tensor dst) {
        Shapes.sameNumel("copy", src, dst);
        if (src.dtype() == dst.dtype()) {
            threads.checkOpen();
            CpuStorage s = CpuStorage.of(src);
            CpuStorage d = CpuStorage.of(dst);
            d.bytes().put(Math.toIntExact(dst.byteOffset()), s.bytes(), Math.toIntExact(src.byteOffset()),
                    Math.toIntExact(src.numBytes()));
            return;
        }
        if (!src.dtype().isFloating() || !dst.dtype().isFloating()) {
            throw Shapes.error("copy", "int32 tensors copy only to int32", src, dst);
        }
        Pointwise.map(threads, new Tensor[] {src}, new Tensor[] {dst}, (x, n) -> {   // the store rounds
        });
    }

    static void add(CpuThreads threads, Tensor a, Tensor b, Tensor out) {
        Shapes.pointwise("add", a, b, out);
        Pointwise.map(threads, new Tensor[] {a, b}, new Tensor[] {out}, (x, n) -> addInPlace(x[0], x[1], 0, n));
    }

    /** out = (a + b) · alpha for an fp32 out: per chunk the add, then the scale, each rounded in fp32. */
    static void addScaled(CpuThreads threads, Tensor a, Tensor b, float alpha, Tensor out) {
        Shapes.pointwise("addScaled", a, b, out);
        Pointwise.map(threads, new Tensor[] {a, b}, new Tensor[] {out}, (x, n) -> {
            addInPlace(x[0], x[1], 0, n);
            scaleInPlace(x[0], n, alpha);
        });
    }

    static void scale(CpuThreads threads, Tensor t, float alpha) {
        Shapes.floating("scale", t);
        Pointwise.map(threads, new Tensor[] {t}, new Tensor[] {t}, (x, n) -> scaleInPlace(x[0], n, alpha));
    }

    /** a[0..n) *= alpha. */
    @CompiledAlone
    private static void scaleInPlace(float[] a, int n, float alpha) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector.fromArray(Simd.F, a, i).mul(alpha).intoArray(a, i);
        }
        for (; i < n; i++) {
            a[i] *= alpha;
        }
    }

    /** out (N, OC) += bias (OC). */
    static void addBias(CpuThreads threads, Tensor out, Tensor bias) {
        int oc = Shapes.bias("addBias", out, bias);
        float[] b = Elements.of(bias).loadAll();
        Elements eo = Elements.of(out);
        threads.forChunks(Shapes.rows(out), CpuThreads.rowsPerChunk(oc, GRAIN), (c, from, to) -> {
            float[] row = Scratch.floats(0, oc);
            for (long r = from; r < to; r++) {
                eo.load(r * oc, row, 0, oc);
                addInPlace(row, b, 0, oc);
                eo.store(row, 0, r * oc, oc);
            }
        });
    }

    /** dbias (OC) += column sums of dout (N, OC), in fp64 over fixed row chunks. */
    static void biasBackward(CpuThreads threads, Tensor dout, Tensor dbias) {
        int oc = Shapes.bias("biasBackward", dout, dbias);
        ColumnSums sums = new ColumnSums(Shapes.rows(dout), oc);
        Elements ed = Elements.of(dout);
        threads.forChunks(sums.rows, sums.rowsPerChunk, (c, from, to) -> {
            double[] acc = sums.partial(c);
            float[] row = Scratch.floats(0, oc);
            for (long r = from; r < to; r++) {
                ed.load(r * oc, row, 0, oc);
                Simd.addInto(acc, row, oc);
            }
        });
        sums.addTo(dbias);
    }

    // GELU (tanh approximation): the math is Gelu's, which PanelGemm's fused stores share.

    static void geluForward(CpuThreads threads, Tensor inp, Tensor out) {
        Shapes.pointwise("geluForward", inp, out);
        Pointwise.map(threads, new Tensor[] {inp}, new Tensor[] {out},
                (xs, n) -> Gelu.forwardInPlace(xs[0], 0, n, Scratch.floats(1, n)));
    }

    /** dinp += GELU'(inp) · dout. */
    static void geluBackward(CpuThreads threads, Tensor inp, Tensor dout, Tensor dinp) {
        Shapes.pointwise("geluBackward", inp, dout, dinp);
        Pointwise.map(threads, new Tensor[] {dinp, inp, dout}, new Tensor[] {dinp},
                (xs, n) -> Gelu.backward(xs[0], 0, xs[1], 0, xs[2], 0, n, Scratch.floats(3, n)));
    }

    // SwiGLU's gate: SiLU(g) = g·σ(g) with σ(g) = 1 / (1 + e^(−g)), e^(−g) from FloatExp. FloatExp
    // clamps its argument to [−87, 88], which kept σ(g) ≥ e^−88 for every g (SiLU(−3e38) was −1.82,
    // SiLU(−∞) −∞) and made SiLU'(+∞) ∞·0: below SILU_TAIL, where 1 + e^(−g) is e^(−g) in fp32,
    // SiLU is g·e^g and SiLU' (1 + g)·e^g, with e^g = e^(g + 64)·e^−64 from the same single exp;
    // below SILU_ZERO both round to −0, and above SILU_ONE SiLU' is 1.

    /** Below this gate the tail forms (e^80 ≫ 2^24). */
    static final float SILU_TAIL = -80f;
    /** Below this gate g + 64 is past the exp's clamp, and SiLU and SiLU' are below 1e-63: −0. */
    static final float SILU_ZERO = -151f;
    /** Above this gate SiLU' is 1 in fp32 (the formula's g·(1 − σ) is ∞·0 at +∞). */
    static final float SILU_ONE = 80f;

    /** SiLU's exp: e^(−g), or e^(g + 64) below SILU_TAIL. */
    private static float siluExp(float g) {
        return FloatExp.exp(g < SILU_TAIL ? g + FloatExp.TAIL_SHIFT : -g);
    }

    /** out = SiLU(gate) · up. */
    static void swigluForward(CpuThreads threads, Tensor gate, Tensor up, Tensor out) {
        Shapes.pointwise("swigluForward", gate, up, out);
        Pointwise.map(threads, new Tensor[] {gate, up}, new Tensor[] {out}, (xs, n) -> {
            float[] g = xs[0];
            float[] u = xs[1];
            for (int i = 0; i < n; i++) {
                float v = g[i];
                float e = siluExp(v);
                float silu = v < SILU_ZERO ? -0f : v < SILU_TAIL ? v * e * FloatExp.EXP_MINUS_TAIL_SHIFT : v / (1f + e);
                g[i] = silu * u[i];
            }
        });
    }

    /** dgate += dout · up · SiLU'(gate), dup += dout · SiLU(gate), SiLU'(g) = σ(g)·(1 + g·(1 − σ(g))). */
    static void swigluBackward(CpuThreads threads, Tensor gate, Tensor up, Tensor dout, Tensor dgate, Tensor dup) {
        Shapes.pointwise("swigluBackward", gate, up, dout, dgate, dup);
        Pointwise.map(threads, new Tensor[] {dgate, dup, gate, up, dout}, new Tensor[] {dgate, dup}, (xs, n) -> {
            float[] dg = xs[0];
            float[] du = xs[1];
            float[] g = xs[2];
            float[] u = xs[3];
            float[] d = xs[4];
            for (int i = 0; i < n; i++) {
                float v = g[i];
                float e = siluExp(v);
                float s = 1f / (1f + e);
                float slope = v > SILU_ONE ? 1f
                        : v < SILU_ZERO ? -0f
                        : v < SILU_TAIL ? (1f + v) * e * FloatExp.EXP_MINUS_TAIL_SHIFT
                        : s * (1f + v * (1f - s));
                dg[i] += d[i] * u[i] * slope;
                float silu = v < SILU_ZERO ? -0f : v < SILU_TAIL ? v * e * FloatExp.EXP_MINUS_TAIL_SHIFT : v * s;
                du[i] += d[i] * silu;
            }
        });
    }

    /** a[from..to) += b[from..to). */
    @CompiledAlone
    static void addInPlace(float[] a, float[] b, int from, int to) {
        int i = from;
        for (; i <= to - Simd.FL; i += Simd.FL) {
            FloatVector.fromArray(Simd.F, a, i).add(FloatVector.fromArray(Simd.F, b, i)).intoArray(a, i);
        }
        for (; i < to; i++) {
            a[i] += b[i];
        }
    }
}
