// The non-GEMM parts of causal self-attention: moving heads between the token-major layout
// (B, T, C) and the head-major layout (B, H, T, C/H) the batched GEMMs want, and the causal
// softmax over (BH, T, T) score matrices. Rows are independent, so all parallelise over rows.
package org.fsdp4j.backend.cpu;

import java.util.Arrays;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes.HeadLayout;
import org.fsdp4j.backend.Shapes;

final class AttentionOps {

    private AttentionOps() {
    }

    /** qkv (B, T, 3C) → q, k, v (B, H, T, C/H). */
    static void splitHeads(CpuThreads threads, Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads) {
        HeadLayout l = Shapes.splitHeads("splitHeads", qkv, q, k, v, numHeads);
        Elements src = Elements.of(qkv);
        Elements[] dst = {Elements.of(q), Elements.of(k), Elements.of(v)};
        threads.forChunks(l.tokens(), CpuThreads.rowsPerChunk(3L * l.c(), ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] row = Scratch.floats(0, 3 * l.c());
            for (long bt = from; bt < to; bt++) {
                src.load(bt * 3 * l.c(), row, 0, 3 * l.c());
                for (int part = 0; part < 3; part++) {
                    for (int h = 0; h < l.heads(); h++) {
                        dst[part].store(row, part * l.c() + h * l.hs(), l.headRow(bt, h), l.hs());
                    }
                }
            }
        });
    }

    /** dqkv (B, T, 3C) += the token-major layout of dq, dk, dv (B, H, T, C/H). */
    static void splitHeadsBackward(CpuThreads threads, Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int numHeads) {
        HeadLayout l = Shapes.splitHeads("splitHeadsBackward", dqkv, dq, dk, dv, numHeads);
        Elements dst = Elements.of(dqkv);
        Elements[] src = {Elements.of(dq), Elements.of(dk), Elements.of(dv)};
        threads.forChunks(l.tokens(), CpuThreads.rowsPerChunk(3L * l.c(), ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] row = Scratch.floats(0, 3 * l.c());
            float[] head = Scratch.floats(1, l.hs());
            for (long bt = from; bt < to; bt++) {
                dst.load(bt * 3 * l.c(), row, 0, 3 * l.c());
                for (int part = 0; part < 3; part++) {
                    for (int h = 0; h < l.heads(); h++) {
                        src[part].load(l.headRow(bt, h), head, 0, l.hs());
                        int off = part * l.c() + h * l.hs();
                        for (int i = 0; i < l.hs(); i++) {
                            row[off + i] += head[i];
                        }
                    }
                }
                dst.store(row, 0, bt * 3 * l.c(), 3 * l.c());
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
            for (long r = from; r < to; r++) {
                int len = (int) (r % t) + 1;   // row i sees keys 0..i
                ep.load(r * t, x, 0, len);
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < len; j++) {
                    x[j] *= scale;
                    max = Math.max(max, x[j]);
                }
                double sum = 0;
                for (int j = 0; j < len; j++) {
                    double e = Math.exp(x[j] - max);
                    x[j] = (float) e;
                    sum += e;
                }
                float inv = (float) (1.0 / sum);
                for (int j = 0; j < len; j++) {
                    x[j] *= inv;
                }
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
            for (long r = from; r < to; r++) {
                int len = (int) (r % t) + 1;
                ea.load(r * t, a, 0, len);
                eg.load(r * t, g, 0, len);
                ed.load(r * t, d, 0, len);
                double dot = 0;
                for (int j = 0; j < len; j++) {
                    dot += (double) a[j] * g[j];
                }
                float dotF = (float) dot;
                for (int j = 0; j < len; j++) {
                    d[j] += scale * a[j] * (g[j] - dotF);
                }
                ed.store(d, 0, r * t, len);
            }
        });
    }
}
