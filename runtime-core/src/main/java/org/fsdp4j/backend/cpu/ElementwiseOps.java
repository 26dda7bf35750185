// The CPU backend's pointwise ops (fill, cast-copy, add, scale, bias, GELU, SwiGLU): chunks of
// elements or rows are loaded into fp32 scratch, computed, and rounded back on store.
package org.fsdp4j.backend.cpu;

import java.util.Arrays;
import org.fsdp4j.backend.Shapes;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Tensor;

final class ElementwiseOps {

    /** Elements per chunk of a pointwise loop: big enough to amortise a task, small enough for L2. */
    static final long GRAIN = 1 << 14;

    private static final float GELU_SCALE = (float) Math.sqrt(2.0 / Math.PI);
    private static final float GELU_CUBIC = 0.044715f;

    private ElementwiseOps() {
    }

    static void fill(CpuThreads threads, Tensor t, float value) {
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
        Pointwise.map(threads, new Tensor[] {a, b}, new Tensor[] {out}, (x, n) -> {
            for (int i = 0; i < n; i++) {
                x[0][i] += x[1][i];
            }
        });
    }

    static void scale(CpuThreads threads, Tensor t, float alpha) {
        Shapes.floating("scale", t);
        Pointwise.map(threads, new Tensor[] {t}, new Tensor[] {t}, (x, n) -> {
            for (int i = 0; i < n; i++) {
                x[0][i] *= alpha;
            }
        });
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
                for (int j = 0; j < oc; j++) {
                    row[j] += b[j];
                }
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
                for (int j = 0; j < oc; j++) {
                    acc[j] += row[j];
                }
            }
        });
        sums.addTo(dbias);
    }

    // GELU(v) = ½v(1 + tanh u) with u = √(2/π)(v + 0.044715v³), written as v·σ(2u) = v / (1 + E) with
    // E = exp(−2u): the same function, but 1 + tanh u never cancels for negative u, and one fp32
    // exp serves both tanh and its derivative (σ'(2u) = E·σ², no 1 − tanh² cancellation either).

    static void geluForward(CpuThreads threads, Tensor inp, Tensor out) {
        Shapes.pointwise("geluForward", inp, out);
        Pointwise.map(threads, new Tensor[] {inp}, new Tensor[] {out}, (xs, n) -> {
            float[] x = xs[0];
            for (int i = 0; i < n; i++) {
                float v = x[i];
                x[i] = v / (1f + FloatExp.exp(-2f * geluArg(v)));
            }
        });
    }

    /** dinp += GELU'(inp) · dout, with GELU'(v) = σ + 2v·E·σ²·u'(v) for σ = 1 / (1 + E). */
    static void geluBackward(CpuThreads threads, Tensor inp, Tensor dout, Tensor dinp) {
        Shapes.pointwise("geluBackward", inp, dout, dinp);
        Pointwise.map(threads, new Tensor[] {dinp, inp, dout}, new Tensor[] {dinp}, (xs, n) -> {
            float[] d = xs[0];
            float[] x = xs[1];
            float[] g = xs[2];
            for (int i = 0; i < n; i++) {
                float v = x[i];
                float e = FloatExp.exp(-2f * geluArg(v));   // clamped, so e·σ² below is never ∞·0
                float s = 1f / (1f + e);
                float du = GELU_SCALE * (1f + 3f * GELU_CUBIC * v * v);
                float local = s + 2f * v * (e * s) * s * du;
                d[i] += local * g[i];
            }
        });
    }

    // SwiGLU's gate: SiLU(g) = g·σ(g) with σ(g) = 1 / (1 + e^(−g)), e^(−g) from FloatExp (clamped to
    // [−87, 88], so σ is exactly 0 or 1 only far out, and ∞·0 never occurs in the derivative).

    /** out = SiLU(gate) · up. */
    static void swigluForward(CpuThreads threads, Tensor gate, Tensor up, Tensor out) {
        Shapes.pointwise("swigluForward", gate, up, out);
        Pointwise.map(threads, new Tensor[] {gate, up}, new Tensor[] {out}, (xs, n) -> {
            float[] g = xs[0];
            float[] u = xs[1];
            for (int i = 0; i < n; i++) {
                float v = g[i];
                g[i] = v / (1f + FloatExp.exp(-v)) * u[i];
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
                float s = 1f / (1f + FloatExp.exp(-v));
                float silu = v * s;
                dg[i] += d[i] * u[i] * (s * (1f + v * (1f - s)));
                du[i] += d[i] * silu;
            }
        });
    }

    /** u = √(2/π)(v + 0.044715v³), the tanh argument of the GELU. */
    private static float geluArg(float v) {
        return GELU_SCALE * (v + GELU_CUBIC * v * v * v);
    }
}
