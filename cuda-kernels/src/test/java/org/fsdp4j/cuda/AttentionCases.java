// Emulator cases for attention.cu through AttentionLauncher: the head split and merge (exact moves
// with a dtype change) and their accumulating backwards, for T = 1, head sizes that are not a
// power of two, more than one block of elements, and fewer key/value heads than query heads
// (grouped-query: 1 of 2, 2 of 4); the causal softmax forward and backward,
// one warp per row, for T = 1, T across and far above 32 lanes, −inf scores (masked keys) and
// large ones (the max subtraction), references in the kernel's fp32 order (Approx).
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class AttentionCases {

    private AttentionCases() {
    }

    /** (B, T, H, D, Hkv): small, T = 1 with an odd head size, and several blocks' worth (the last two grouped-query). */
    private static final int[][] SHAPES = {{2, 5, 3, 4, 3}, {1, 1, 2, 7, 1}, {3, 33, 4, 16, 2}};
    /** Per shape (a, b): split and merge-backward go a → b, their counterparts b → a. */
    private static final DType[][] DTYPES = {{DType.F32, DType.F32}, {DType.BF16, DType.F16}, {DType.F16, DType.BF16}};

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        for (int i = 0; i < SHAPES.length; i++) {
            int[] s = SHAPES[i];
            DType[] d = DTYPES[i];
            out.add(split(r, d[0], d[1], s[0], s[1], s[2], s[4], s[3]));
            out.add(splitBackward(r, d[1], d[0], s[0], s[1], s[2], s[4], s[3]));
            out.add(merge(r, d[1], d[0], s[0], s[1], s[2], s[3]));
            out.add(mergeBackward(r, d[0], d[1], s[0], s[1], s[2], s[3]));
        }
        out.add(softmaxForward(r, DType.F32, DType.F32, 6, 5, 0.5f, false));
        out.add(softmaxForward(r, DType.BF16, DType.F32, 4, 33, 0.25f, false));
        out.add(softmaxForward(r, DType.F16, DType.F16, 2, 1, 0.125f, false));
        out.add(softmaxForward(r, DType.F32, DType.BF16, 3, 100, 1f, true));
        out.add(softmaxBackward(r, DType.F32, DType.F32, DType.F32, 6, 5, 0.5f));
        out.add(softmaxBackward(r, DType.BF16, DType.F32, DType.F32, 4, 33, 0.25f));
        out.add(softmaxBackward(r, DType.F16, DType.F16, DType.F16, 2, 1, 0.125f));
        out.add(softmaxBackward(r, DType.F32, DType.BF16, DType.BF16, 3, 100, 1f));
        return out;
    }

    /** Index in qkv (B, T, (H + 2·Hkv)·D) of part p (0 q, 1 k, 2 v) of head element (b, h, t, d). */
    private static int qkvIndex(int b, int t, int h, int d, int p, int tt, int hh, int kv, int dd) {
        int w = (hh + 2 * kv) * dd;
        int partStart = p == 0 ? 0 : (hh + (p - 1) * kv) * dd;
        return (b * tt + t) * w + partStart + h * dd + d;
    }

    /** Heads of part p: H for q, Hkv for k and v. */
    private static int heads(int p, int hh, int kv) {
        return p == 0 ? hh : kv;
    }

    private static int headIndex(int b, int h, int t, int d, int tt, int hh, int dd) {
        return ((b * hh + h) * tt + t) * dd + d;
    }

    private static String shape(int b, int t, int h, int d) {
        return "B=" + b + " T=" + t + " H=" + h + " D=" + d;
    }

    private static EmuCase split(Random r, DType from, DType to, int bb, int tt, int hh, int kv, int dd) {
        EmuCase c = new EmuCase("split_heads_kernel", from + "->" + to + " " + shape(bb, tt, hh, dd) + " Hkv=" + kv);
        Tensor qkv = c.device.allocate(from, bb, tt, (long) (hh + 2 * kv) * dd);
        Tensor[] heads = new Tensor[3];
        for (int p = 0; p < 3; p++) {
            heads[p] = c.device.allocate(to, bb, heads(p, hh, kv), tt, dd);
        }
        double[] x = c.device.put(qkv, EmuData.uniform(r, bb * tt * (hh + 2 * kv) * dd, 5));
        new AttentionLauncher(c.device).splitHeads(null, qkv, heads[0], heads[1], heads[2], bb, tt, hh, kv, dd);
        for (int p = 0; p < 3; p++) {
            int ph = heads(p, hh, kv);
            double[] want = new double[bb * ph * tt * dd];
            for (int b = 0; b < bb; b++) {
                for (int h = 0; h < ph; h++) {
                    for (int t = 0; t < tt; t++) {
                        for (int d = 0; d < dd; d++) {
                            want[headIndex(b, h, t, d, tt, ph, dd)] = x[qkvIndex(b, t, h, d, p, tt, hh, kv, dd)];
                        }
                    }
                }
            }
            c.expectExact("qkv".substring(p, p + 1), heads[p], want);
        }
        return c;
    }

    private static EmuCase splitBackward(Random r, DType from, DType to, int bb, int tt, int hh, int kv, int dd) {
        EmuCase c = new EmuCase("split_heads_backward_kernel", from + "->" + to + " " + shape(bb, tt, hh, dd)
                + " Hkv=" + kv);
        Tensor[] dheads = new Tensor[3];
        double[][] g = new double[3][];
        for (int p = 0; p < 3; p++) {
            dheads[p] = c.device.allocate(from, bb, heads(p, hh, kv), tt, dd);
            g[p] = c.device.put(dheads[p], EmuData.uniform(r, bb * heads(p, hh, kv) * tt * dd, 2));
        }
        Tensor dqkv = c.device.allocate(to, bb, tt, (long) (hh + 2 * kv) * dd);
        double[] d0 = c.device.put(dqkv, EmuData.uniform(r, bb * tt * (hh + 2 * kv) * dd, 2));
        new AttentionLauncher(c.device).splitHeadsBackward(null, dheads[0], dheads[1], dheads[2], dqkv, bb, tt, hh, kv,
                dd);
        Approx[] ref = new Approx[d0.length];
        for (int p = 0; p < 3; p++) {
            int ph = heads(p, hh, kv);
            for (int b = 0; b < bb; b++) {
                for (int h = 0; h < ph; h++) {
                    for (int t = 0; t < tt; t++) {
                        for (int d = 0; d < dd; d++) {
                            int i = qkvIndex(b, t, h, d, p, tt, hh, kv, dd);
                            ref[i] = Approx.exact(d0[i]).plus(Approx.exact(g[p][headIndex(b, h, t, d, tt, ph, dd)]));
                        }
                    }
                }
            }
        }
        c.expect("dqkv", dqkv, ref);
        return c;
    }

    private static EmuCase merge(Random r, DType from, DType to, int bb, int tt, int hh, int dd) {
        EmuCase c = new EmuCase("merge_heads_kernel", from + "->" + to + " " + shape(bb, tt, hh, dd));
        Tensor y = c.device.allocate(from, bb, hh, tt, dd);
        Tensor out = c.device.allocate(to, bb, tt, (long) hh * dd);
        double[] x = c.device.put(y, EmuData.uniform(r, bb * hh * tt * dd, 5));
        new AttentionLauncher(c.device).mergeHeads(null, y, out, bb, tt, hh, dd);
        double[] want = new double[x.length];
        for (int b = 0; b < bb; b++) {
            for (int h = 0; h < hh; h++) {
                for (int t = 0; t < tt; t++) {
                    for (int d = 0; d < dd; d++) {
                        want[(b * tt + t) * hh * dd + h * dd + d] = x[headIndex(b, h, t, d, tt, hh, dd)];
                    }
                }
            }
        }
        c.expectExact("out", out, want);
        return c;
    }

    private static EmuCase mergeBackward(Random r, DType from, DType to, int bb, int tt, int hh, int dd) {
        EmuCase c = new EmuCase("merge_heads_backward_kernel", from + "->" + to + " " + shape(bb, tt, hh, dd));
        Tensor dout = c.device.allocate(from, bb, tt, (long) hh * dd);
        Tensor dy = c.device.allocate(to, bb, hh, tt, dd);
        double[] g = c.device.put(dout, EmuData.uniform(r, bb * tt * hh * dd, 2));
        double[] d0 = c.device.put(dy, EmuData.uniform(r, bb * tt * hh * dd, 2));
        new AttentionLauncher(c.device).mergeHeadsBackward(null, dout, dy, bb, tt, hh, dd);
        Approx[] ref = new Approx[d0.length];
        for (int b = 0; b < bb; b++) {
            for (int h = 0; h < hh; h++) {
                for (int t = 0; t < tt; t++) {
                    for (int d = 0; d < dd; d++) {
                        int i = headIndex(b, h, t, d, tt, hh, dd);
                        ref[i] = Approx.exact(d0[i]).plus(Approx.exact(g[(b * tt + t) * hh * dd + h * dd + d]));
                    }
                }
            }
        }
        c.expect("dy", dy, ref);
        return c;
    }

    /** Per row, each lane visits ⌈(t+1)/32⌉ keys in order, then a 5-level butterfly. */
    private static long rowDepth(int keys) {
        return (keys + 31) / 32 + 5;
    }

    /** preatt (BH, T, T) U(−3, 3); with {@code masked}, some keys −inf and some scores ±30. */
    private static EmuCase softmaxForward(Random r, DType in, DType outDt, int bh, int tt, float scale, boolean masked) {
        EmuCase c = new EmuCase("causal_softmax_forward_kernel", in + "->" + outDt + " BH=" + bh + " T=" + tt
                + " scale=" + scale + (masked ? " masked" : ""));
        long rows = (long) bh * tt;
        Tensor preatt = c.device.allocate(in, bh, tt, tt);
        Tensor att = c.device.allocate(outDt, bh, tt, tt);
        double[] v = EmuData.uniform(r, bh * tt * tt, 3);
        if (masked) {
            for (int i = 0; i < v.length; i++) {
                int j = i % tt;
                if (j > 0 && r.nextInt(5) == 0) {
                    v[i] = Double.NEGATIVE_INFINITY;   // key 0 stays finite: no row is all −inf
                } else if (r.nextInt(7) == 0) {
                    v[i] = r.nextBoolean() ? 30 : -30;
                }
            }
        }
        double[] x = c.device.put(preatt, v);
        new AttentionLauncher(c.device).causalSoftmaxForward(null, preatt, att, rows, tt, scale);
        Approx[] ref = new Approx[x.length];
        for (int row = 0; row < rows; row++) {
            int keys = row % tt + 1;
            Approx[] sx = new Approx[keys];
            Approx m = Approx.exact(Double.NEGATIVE_INFINITY);
            for (int j = 0; j < keys; j++) {
                sx[j] = Approx.exact(x[row * tt + j]).times(scale);
                m = Approx.max(m, sx[j]);
            }
            List<Approx> e = new ArrayList<>();
            for (int j = 0; j < keys; j++) {
                e.add(sx[j].minus(m).exp());
            }
            Approx inv = Approx.exact(1).div(Approx.sum(e, rowDepth(keys)));
            for (int j = 0; j < tt; j++) {
                ref[row * tt + j] = j < keys ? e.get(j).times(inv) : Approx.exact(0);
            }
        }
        c.expect("att", att, ref);
        return c;
    }

    private static EmuCase softmaxBackward(Random r, DType attDt, DType gDt, DType dDt, int bh, int tt, float scale) {
        EmuCase c = new EmuCase("causal_softmax_backward_kernel", attDt + "," + gDt + "->" + dDt + " BH=" + bh
                + " T=" + tt + " scale=" + scale);
        long rows = (long) bh * tt;
        int n = bh * tt * tt;
        Tensor att = c.device.allocate(attDt, bh, tt, tt);
        Tensor datt = c.device.allocate(gDt, bh, tt, tt);
        Tensor dpreatt = c.device.allocate(dDt, bh, tt, tt);
        double[] a = c.device.put(att, EmuData.uniform(r, n, 0, 1));
        double[] g = c.device.put(datt, EmuData.uniform(r, n, 2));
        double[] d0 = c.device.put(dpreatt, EmuData.uniform(r, n, 1));
        new AttentionLauncher(c.device).causalSoftmaxBackward(null, att, datt, dpreatt, rows, tt, scale);
        Approx[] ref = new Approx[n];
        for (int row = 0; row < rows; row++) {
            int keys = row % tt + 1;
            List<Approx> products = new ArrayList<>();
            for (int j = 0; j < keys; j++) {
                products.add(Approx.exact(a[row * tt + j]).times(Approx.exact(g[row * tt + j])));
            }
            Approx dot = Approx.sum(products, rowDepth(keys));
            for (int j = 0; j < tt; j++) {
                int i = row * tt + j;
                ref[i] = j < keys
                        ? Approx.exact(d0[i]).plus(Approx.exact(a[i]).times(scale).times(Approx.exact(g[i]).minus(dot)))
                        : Approx.exact(d0[i]);   // above the diagonal: left as it was
            }
        }
        c.expect("dpreatt", dpreatt, ref);
        return c;
    }
}
