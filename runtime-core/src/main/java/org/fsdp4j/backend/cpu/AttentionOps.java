// The non-GEMM parts of causal self-attention: moving heads between the token-major layout
// (B, T, C) and the head-major layout (B, H, T, C/H) the batched GEMMs want (a fused qkv may
// carry fewer key/value heads than query heads: grouped-query attention), the causal softmax
// over (BH, T, T) score matrices, and rotary position embeddings. Rows are independent, so all
// parallelise over rows.
// The softmax is vectorised (Simd): exp in fp32 (FloatExp's, about 1 ulp), its sum and the
// backward's dot product in fp64.
package org.fsdp4j.backend.cpu;

import java.util.Arrays;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes.HeadLayout;
import org.fsdp4j.backend.Shapes.QkvLayout;
import org.fsdp4j.backend.Shapes;

final class AttentionOps {

    private AttentionOps() {
    }

    /** qkv (B, T, (H + 2·Hkv)·D) → q (B, H, T, D), k, v (B, Hkv, T, D). */
    static void splitHeads(CpuThreads threads, Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads) {
        QkvLayout l = Shapes.splitHeads("splitHeads", qkv, q, k, v, numHeads);
        HeadLayout[] layouts = {l.q(), l.kv(), l.kv()};
        int[] offsets = {0, l.q().c(), l.q().c() + l.kv().c()};
        int w = l.width();
        Elements src = Elements.of(qkv);
        Elements[] dst = {Elements.of(q), Elements.of(k), Elements.of(v)};
        threads.forChunks(l.q().tokens(), CpuThreads.rowsPerChunk(w, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] row = Scratch.floats(0, w);
            for (long bt = from; bt < to; bt++) {
                src.load(bt * w, row, 0, w);
                for (int part = 0; part < 3; part++) {
                    HeadLayout hl = layouts[part];
                    for (int h = 0; h < hl.heads(); h++) {
                        dst[part].store(row, offsets[part] + h * l.hs(), hl.headRow(bt, h), l.hs());
                    }
                }
            }
        });
    }

    /** dqkv (B, T, (H + 2·Hkv)·D) += the token-major layout of dq (B, H, T, D), dk, dv (B, Hkv, T, D). */
    static void splitHeadsBackward(CpuThreads threads, Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads) {
        QkvLayout l = Shapes.splitHeads("splitHeadsBackward", dqkv, dq, dk, dv, numHeads);
        HeadLayout[] layouts = {l.q(), l.kv(), l.kv()};
        int[] offsets = {0, l.q().c(), l.q().c() + l.kv().c()};
        int w = l.width();
        Elements dst = Elements.of(dqkv);
        Elements[] src = {Elements.of(dq), Elements.of(dk), Elements.of(dv)};
        threads.forChunks(l.q().tokens(), CpuThreads.rowsPerChunk(w, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] row = Scratch.floats(0, w);
            float[] head = Scratch.floats(1, l.hs());
            for (long bt = from; bt < to; bt++) {
                dst.load(bt * w, row, 0, w);
                for (int part = 0; part < 3; part++) {
                    HeadLayout hl = layouts[part];
                    for (int h = 0; h < hl.heads(); h++) {
                        src[part].load(hl.headRow(bt, h), head, 0, l.hs());
                        int off = offsets[part] + h * l.hs();
                        for (int i = 0; i < l.hs(); i++) {
                            row[off + i] += head[i];
                        }
                    }
                }
                dst.store(row, 0, bt * w, w);
            }
        });
    }

    /** out (B, T, C) = y (B, H, T, C/H) with the heads side by side. */
    static void mergeHeads(CpuThreads threads, Tensor y, Tensor out) {
        HeadLayout l = Shapes.mergeHeads("mergeHeads", y, out);
        Elements src = Elements.of(y);
        Elements dst = Elements.of(out);
        threads.forChunks(l.tokens(), CpuThreads.rowsPerChunk(l.c(), ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] row = Scratch.floats(0, l.c());
            for (long bt = from; bt < to; bt++) {
                for (int h = 0; h < l.heads(); h++) {
                    src.load(l.headRow(bt, h), row, h * l.hs(), l.hs());
                }
                dst.store(row, 0, bt * l.c(), l.c());
            }
        });
    }

    /** dy (B, H, T, C/H) += the head-major layout of dout (B, T, C). */
    static void mergeHeadsBackward(CpuThreads threads, Tensor dout, Tensor dy) {
        HeadLayout l = Shapes.mergeHeads("mergeHeadsBackward", dy, dout);
        Elements src = Elements.of(dout);
        Elements dst = Elements.of(dy);
        threads.forChunks(l.tokens(), CpuThreads.rowsPerChunk(l.c(), ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] row = Scratch.floats(0, l.c());
            float[] head = Scratch.floats(1, l.hs());
            for (long bt = from; bt < to; bt++) {
                src.load(bt * l.c(), row, 0, l.c());
                for (int h = 0; h < l.heads(); h++) {
                    long at = l.headRow(bt, h);
                    dst.load(at, head, 0, l.hs());
                    for (int i = 0; i < l.hs(); i++) {
                        head[i] += row[h * l.hs() + i];
                    }
                    dst.store(head, 0, at, l.hs());
                }
            }
        });
    }

    /** att[i, j] = softmax_{j ≤ i}(scale · preatt[i, j]), 0 above the diagonal; rows of (BH, T, T). */
    static void causalSoftmaxForward(CpuThreads threads, Tensor preatt, Tensor att, float scale) {
        int t = Shapes.causalSoftmax("causalSoftmaxForward", preatt, att);
        Elements ep = Elements.of(preatt);
        Elements ea = Elements.of(att);
        threads.forChunks(Shapes.rows(preatt), CpuThreads.rowsPerChunk(t, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] x = Scratch.floats(0, t);
            double[] lanes = Simd.laneScratch();
            for (long r = from; r < to; r++) {
                int len = (int) (r % t) + 1;   // row i sees keys 0..i
                ep.load(r * t, x, 0, len);
                softmaxRow(x, len, scale, lanes);
                Arrays.fill(x, len, t, 0f);
                ea.store(x, 0, r * t, t);
            }
        });
    }

    /** dpreatt[i, j] += scale · att[i, j] · (datt[i, j] − Σ_k att[i, k] datt[i, k]) for j ≤ i. */
    static void causalSoftmaxBackward(CpuThreads threads, Tensor att, Tensor datt, Tensor dpreatt, float scale) {
        int t = Shapes.causalSoftmax("causalSoftmaxBackward", att, datt, dpreatt);
        Elements ea = Elements.of(att);
        Elements eg = Elements.of(datt);
        Elements ed = Elements.of(dpreatt);
        threads.forChunks(Shapes.rows(att), CpuThreads.rowsPerChunk(t, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] a = Scratch.floats(0, t);
            float[] g = Scratch.floats(1, t);
            float[] d = Scratch.floats(2, t);
            double[] lanes = Simd.laneScratch();
            for (long r = from; r < to; r++) {
                int len = (int) (r % t) + 1;
                ea.load(r * t, a, 0, len);
                eg.load(r * t, g, 0, len);
                ed.load(r * t, d, 0, len);
                softmaxBackwardRow(a, g, d, len, scale, lanes);
                ed.store(d, 0, r * t, len);
            }
        });
    }

    // The row loops are methods of their own, compiled alone (@CompiledAlone, JitDirectives), so
    // that C2 inlines every vector op of one (a vector op left out of the inlining budget would run
    // boxed, an allocation per op).

    /** x[0..len) = softmax(scale · x[0..len)): exp in fp32 (FloatExp), the sum in fp64. */
    @CompiledAlone
    static void softmaxRow(float[] x, int len, float scale, double[] lanes) {
        int vecEnd = len - len % Simd.FL;
        FloatVector maxes = FloatVector.broadcast(Simd.F, Float.NEGATIVE_INFINITY);
        for (int j = 0; j < vecEnd; j += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, j).mul(scale);
            v.intoArray(x, j);
            maxes = maxes.max(v);
        }
        float max = Simd.maxLanes(maxes);
        for (int j = vecEnd; j < len; j++) {
            x[j] *= scale;
            max = Math.max(max, x[j]);
        }
        for (int j = 0; j < vecEnd; j += Simd.FL) {
            FloatVector.fromArray(Simd.F, x, j).sub(max).intoArray(x, j);
        }
        for (int j = vecEnd; j < len; j++) {
            x[j] -= max;
        }
        Simd.expInPlace(x, 0, len);
        float inv = (float) (1.0 / Simd.sum(x, len, lanes));
        for (int j = 0; j < vecEnd; j += Simd.FL) {
            FloatVector.fromArray(Simd.F, x, j).mul(inv).intoArray(x, j);
        }
        for (int j = vecEnd; j < len; j++) {
            x[j] *= inv;
        }
    }

    /**
     * softmaxRow on x[off..off+len) for a row with room to the next whole vector (x holds at least
     * off + roundUp(len, FL) elements): the last partial vector is computed whole,
     * its lanes past the row blended to −∞ before the exp and to 0 after it, instead of the
     * scalar tail, which cost as much as the vector part of a 128-key row.
     * Those lanes are left 0. The sum adds the tail's elements in lanes, so its last bits may
     * differ from softmaxRow's.
     */
    @CompiledAlone
    static void softmaxRowPadded(float[] x, int off, int len, float scale, double[] lanes) {
        int padEnd = off + TileGemm.roundUp(len, Simd.FL);
        int last = padEnd - Simd.FL;
        VectorMask<Float> past = Simd.F.indexInRange(last - off, len).not();
        FloatVector maxes = FloatVector.broadcast(Simd.F, Float.NEGATIVE_INFINITY);
        for (int j = off; j < last; j += Simd.FL) {
            FloatVector v = FloatVector.fromArray(Simd.F, x, j).mul(scale);
            v.intoArray(x, j);
            maxes = maxes.max(v);
        }
        FloatVector tail = FloatVector.fromArray(Simd.F, x, last).mul(scale).blend(Float.NEGATIVE_INFINITY, past);
        tail.intoArray(x, last);
        float max = Simd.maxLanes(maxes.max(tail));
        for (int j = off; j < padEnd; j += Simd.FL) {
            FloatVector.fromArray(Simd.F, x, j).sub(max).intoArray(x, j);
        }
        Simd.expInPlace(x, off, padEnd);
        FloatVector.fromArray(Simd.F, x, last).blend(0f, past).intoArray(x, last);   // no e^−87 · inv denormals
        float inv = (float) (1.0 / Simd.sum(x, off, padEnd - off, lanes));
        for (int j = off; j < padEnd; j += Simd.FL) {
            FloatVector.fromArray(Simd.F, x, j).mul(inv).intoArray(x, j);
        }
    }

    /** d[0..len) += scale · a · (g − Σ a·g), the dot product in fp64. */
    @CompiledAlone
    static void softmaxBackwardRow(float[] a, float[] g, float[] d, int len, float scale, double[] lanes) {
        int dEnd = len - len % Simd.DL;
        DoubleVector acc = DoubleVector.zero(Simd.D);
        int wide = Simd.wideEnd(dEnd, Math.min(a.length, g.length));
        int j0 = 0;
        for (; j0 + Simd.FL <= wide; j0 += Simd.FL) {      // the two halves in turn: lane order as DL steps
            int h = j0 + Simd.DL;
            acc = acc.add(Simd.widenAt(a, j0).mul(Simd.widenAt(g, j0))).add(Simd.widenAt(a, h).mul(Simd.widenAt(g, h)));
        }
        for (; j0 < dEnd; j0 += Simd.DL) {
            acc = acc.add(Simd.widen(a, j0).mul(Simd.widen(g, j0)));
        }
        double dot = Simd.sumLanes(acc, lanes);
        for (int j = dEnd; j < len; j++) {
            dot += (double) a[j] * g[j];
        }
        float dotF = (float) dot;
        int fEnd = len - len % Simd.FL;
        for (int j = 0; j < fEnd; j += Simd.FL) {
            FloatVector av = FloatVector.fromArray(Simd.F, a, j);
            FloatVector gv = FloatVector.fromArray(Simd.F, g, j);
            FloatVector.fromArray(Simd.F, d, j).add(av.mul(scale).mul(gv.sub(dotF))).intoArray(d, j);
        }
        for (int j = fEnd; j < len; j++) {
            d[j] += scale * a[j] * (g[j] - dotF);
        }
    }

    /**
     * g[gOff..gOff+len) = scale · a · (g − Σ a·g) for a at a[aOff..] (softmaxBackwardRow's values,
     * g overwritten instead of added to a zeroed d), for rows with room to the next whole vector:
     * the lanes past the row are blended to 0 in a and g and computed with the rest (they stay 0),
     * so there is no scalar tail; the dot product's last bits may differ from softmaxBackwardRow's.
     */
    @CompiledAlone
    static void softmaxBackwardRowPadded(float[] a, int aOff, float[] g, int gOff, int len, float scale,
                                         double[] lanes) {
        int padLen = TileGemm.roundUp(len, Simd.FL);
        int last = padLen - Simd.FL;
        VectorMask<Float> past = Simd.F.indexInRange(last, len).not();
        FloatVector.fromArray(Simd.F, a, aOff + last).blend(0f, past).intoArray(a, aOff + last);
        FloatVector.fromArray(Simd.F, g, gOff + last).blend(0f, past).intoArray(g, gOff + last);
        DoubleVector acc = DoubleVector.zero(Simd.D);
        int wide = Simd.wideEnd(padLen, Math.min(a.length - aOff, g.length - gOff));
        int j0 = 0;
        for (; j0 + Simd.FL <= wide; j0 += Simd.FL) {      // the two halves in turn: lane order as DL steps
            int h = j0 + Simd.DL;
            acc = acc.add(Simd.widenAt(a, aOff + j0).mul(Simd.widenAt(g, gOff + j0)))
                    .add(Simd.widenAt(a, aOff + h).mul(Simd.widenAt(g, gOff + h)));
        }
        for (; j0 < padLen; j0 += Simd.DL) {
            acc = acc.add(Simd.widen(a, aOff + j0).mul(Simd.widen(g, gOff + j0)));
        }
        float dotF = (float) Simd.sumLanes(acc, lanes);
        for (int j = 0; j < padLen; j += Simd.FL) {
            FloatVector av = FloatVector.fromArray(Simd.F, a, aOff + j);
            FloatVector gv = FloatVector.fromArray(Simd.F, g, gOff + j);
            av.mul(scale).mul(gv.sub(dotF)).intoArray(g, gOff + j);
        }
    }

    /**
     * out (B, H, T, D) = inp with each pair (x_i, x_{i+D/2}) of position t turned by the angle whose
     * cosine and sine are cos[t, i], sin[t, i]; {@code sign} −1 turns back (the backward). out may be inp.
     */
    static void rope(CpuThreads threads, String op, Tensor inp, Tensor cos, Tensor sin, Tensor out, float sign) {
        Shapes.RopeSizes r = Shapes.rope(op, inp, cos, sin, out);
        int half = r.halfDim();
        int d = 2 * half;
        float[] c = Elements.of(cos).loadAll();
        float[] s = Elements.of(sin).loadAll();
        Elements ei = Elements.of(inp);
        Elements eo = Elements.of(out);
        threads.forChunks(r.rows(), CpuThreads.rowsPerChunk(d, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] x = Scratch.floats(0, d);
            for (long row = from; row < to; row++) {
                int at = (int) (row % r.t()) * half;
                ei.load(row * d, x, 0, d);
                for (int i = 0; i < half; i++) {
                    float x1 = x[i];
                    float x2 = x[i + half];
                    float cs = c[at + i];
                    float sn = sign * s[at + i];
                    x[i] = x1 * cs - x2 * sn;
                    x[i + half] = x2 * cs + x1 * sn;
                }
                eo.store(x, 0, row * d, d);
            }
        });
    }
}
