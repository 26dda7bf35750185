// The CPU backend's pointwise ops (fill, cast-copy, add, scale, bias, GELU): chunks of
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

    static void geluForward(CpuThreads threads, Tensor inp, Tensor out) {
        Shapes.pointwise("geluForward", inp, out);
        Pointwise.map(threads, new Tensor[] {inp}, new Tensor[] {out}, (xs, n) -> {
            float[] x = xs[0];
            for (int i = 0; i < n; i++) {
                float v = x[i];
                float u = GELU_SCALE * (v + GELU_CUBIC * v * v * v);
                x[i] = 0.5f * v * (1f + tanh(u));
            }
        });
    }

    /** dinp += GELU'(inp) · dout. */
    static void geluBackward(CpuThreads threads, Tensor inp, Tensor dout, Tensor dinp) {
        Shapes.pointwise("geluBackward", inp, dout, dinp);
        Pointwise.map(threads, new Tensor[] {dinp, inp, dout}, new Tensor[] {dinp}, (xs, n) -> {
            float[] d = xs[0];
            float[] x = xs[1];
            float[] g = xs[2];
            for (int i = 0; i < n; i++) {
                float v = x[i];
                float u = GELU_SCALE * (v + GELU_CUBIC * v * v * v);
                // tanh and sech² from one exp: with e = exp(−2|u|), tanh|u| = (1−e)/(1+e) and
                // sech² u = 4e/(1+e)², which keeps full precision where 1 − tanh² would cancel
                double e = Math.exp(-2.0 * Math.abs(u));
                double inv = 1.0 / (1.0 + e);
                float th = (float) (u < 0 ? (e - 1.0) * inv : (1.0 - e) * inv);
                float sech2 = (float) (4.0 * e * inv * inv);
                float local = 0.5f * (1f + th) + 0.5f * v * sech2 * GELU_SCALE * (1f + 3f * GELU_CUBIC * v * v);
                d[i] += local * g[i];
            }
        });
    }

    /** tanh through exp (an intrinsic; Math.tanh is not), in double so it is exact to fp32 rounding. */
    private static float tanh(float u) {
        double e = Math.exp(-2.0 * Math.abs(u));
        double t = (1.0 - e) / (1.0 + e);
        return (float) (u < 0 ? -t : t);
    }
}
