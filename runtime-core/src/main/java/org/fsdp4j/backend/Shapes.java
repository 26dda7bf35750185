// The argument checks of the Backend contract, shared by every backend so that a wrong call
// fails the same way on the CPU and on a GPU. Every failure is an IllegalArgumentException that
// names the op and prints the shapes involved, so a wrong call is fixed from the message. The
// op checks return the sizes the op runs on.
package org.fsdp4j.backend;

import java.util.Arrays;
import java.util.Locale;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

public final class Shapes {

    private Shapes() {
    }

    public static IllegalArgumentException error(String op, String problem, Tensor... tensors) {
        StringBuilder sb = new StringBuilder(op).append(": ").append(problem).append(" (");
        for (int i = 0; i < tensors.length; i++) {
            Tensor t = tensors[i];
            sb.append(i == 0 ? "" : ", ").append(t.dtype().shortName()).append(Arrays.toString(t.shape()));
        }
        return new IllegalArgumentException(sb.append(')').toString());
    }

    public static void sameNumel(String op, Tensor... tensors) {
        for (Tensor t : tensors) {
            if (t.numel() != tensors[0].numel()) {
                throw error(op, "element counts differ", tensors);
            }
        }
    }

    public static void floating(String op, Tensor... tensors) {
        for (Tensor t : tensors) {
            if (!t.dtype().isFloating()) {
                throw error(op, "expected floating tensors (fp32, fp16, bf16), got " + t.dtype().shortName(), tensors);
            }
        }
    }

    public static void dtype(String op, DType expected, Tensor... tensors) {
        for (Tensor t : tensors) {
            if (t.dtype() != expected) {
                throw error(op, "expected " + expected.shortName() + " tensors", tensors);
            }
        }
    }

    /** A one-element F32 tensor a reduction adds its result into. */
    public static void scalarF32(String op, Tensor out) {
        if (out.dtype() != DType.F32 || out.numel() != 1) {
            throw error(op, "the result goes into one F32 element", out);
        }
    }

    /** A pointwise op's operands: floating tensors of one element count. */
    public static void pointwise(String op, Tensor... tensors) {
        floating(op, tensors);
        sameNumel(op, tensors);
    }

    /** Rows of a tensor viewed as (rows, cols) with cols = its last dim. */
    public static long rows(Tensor t) {
        long cols = t.rank() == 0 ? 1 : t.dim(-1);
        return cols == 0 ? 0 : t.numel() / cols;
    }

    public static int lastDim(Tensor t) {
        return t.rank() == 0 ? 1 : Math.toIntExact(t.dim(-1));
    }

    // ------------------------------------------------------------------ per op

    /** A host copy of t's elements to or from array[offset ..]; returns t's element count. */
    public static int hostRange(String op, int arrayLength, int offset, Tensor t) {
        if (offset < 0 || offset + t.numel() > arrayLength) {
            throw error(op, "host array range [" + offset + ", " + (offset + t.numel())
                    + ") is outside an array of " + arrayLength, t);
        }
        return Math.toIntExact(t.numel());
    }

    /** Elements of A, B and C one strided-batched GEMM reads or writes (see Backend.gemm). */
    public record GemmSpans(long a, long b, long c) {
    }

    /**
     * Checks sizes, leading dims, strides and extents of Backend.gemm's operands, that the
     * batch's outputs do not overlap each other, and that C overlaps neither A nor B. Sizes may
     * be 0 (nothing to compute); ld may then be 0.
     */
    public static GemmSpans gemm(boolean transA, boolean transB, int m, int n, int k,
                                 Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                                 Tensor c, int ldc, long strideC, int batch) {
        floating("gemm", a, b, c);
        if (m < 0 || n < 0 || k < 0 || batch < 0) {
            throw error("gemm", "negative size m=" + m + " n=" + n + " k=" + k + " batch=" + batch, a, b, c);
        }
        long spanA = gemmSpan("A", a, transA ? k : m, transA ? m : k, lda, strideA, batch, a, b, c);
        long spanB = gemmSpan("B", b, transB ? n : k, transB ? k : n, ldb, strideB, batch, a, b, c);
        long spanC = gemmSpan("C", c, m, n, ldc, strideC, batch, a, b, c);
        if (batch > 1 && strideC < extent(m, n, ldc)) {
            throw error("gemm", "strideC=" + strideC + " makes the " + batch + " outputs overlap (each spans "
                    + extent(m, n, ldc) + " elements)", a, b, c);
        }
        gemmDisjoint("A", a, spanA, c, spanC, b);
        gemmDisjoint("B", b, spanB, c, spanC, a);
        return new GemmSpans(spanA, spanB, spanC);
    }

    /** Elements a stored rows×cols matrix with row stride ld spans. */
    public static long extent(long rows, long cols, long ld) {
        return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
    }

    private static long gemmSpan(String name, Tensor x, long rows, long cols, int ld, long stride, int batch,
                                 Tensor... all) {
        if (ld < cols || ld < 0) {
            throw error("gemm", "ld" + name.toLowerCase(Locale.ROOT) + "=" + ld
                    + " is smaller than the " + cols + " columns " + name + " is stored with", all);
        }
        if (stride < 0) {
            throw error("gemm", "stride" + name + "=" + stride + " is negative", all);
        }
        long total = batch == 0 ? 0 : (batch - 1) * stride + extent(rows, cols, ld);
        if (total > x.numel()) {
            throw error("gemm", name + " (" + rows + "×" + cols + ", ld " + ld + ", stride " + stride + ", batch "
                    + batch + ") needs " + total + " elements but has " + x.numel(), all);
        }
        return total;
    }

    private static void gemmDisjoint(String name, Tensor x, long spanX, Tensor c, long spanC, Tensor other) {
        if (x.rawStorage() != c.rawStorage() || spanX == 0 || spanC == 0) {
            return;
        }
        long x0 = x.byteOffset();
        long x1 = x0 + spanX * x.dtype().byteSize();
        long c0 = c.byteOffset();
        long c1 = c0 + spanC * c.dtype().byteSize();
        if (x0 < c1 && c0 < x1) {
            throw error("gemm", "C overlaps " + name + " in the same storage; write C to another buffer", x, other, c);
        }
    }

    /** addBias / biasBackward: matrix (N, OC) and bias (OC), both floating; returns OC. */
    public static int bias(String op, Tensor matrix, Tensor bias) {
        floating(op, matrix, bias);
        int oc = Math.toIntExact(bias.numel());
        if (matrix.rank() == 0 || matrix.dim(-1) != oc) {
            throw error(op, "expected (N, OC) with OC = the bias's element count", matrix, bias);
        }
        return oc;
    }

    /** LayerNorm: inp, out (N, C) and weight, bias (C) floating; mean, rstd (N) F32; returns C. */
    public static int layerNorm(String op, Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean,
                                Tensor rstd) {
        floating(op, inp, weight, bias, out);
        dtype(op, DType.F32, mean, rstd);
        int c = lastDim(inp);
        if (weight.numel() != c || bias.numel() != c || out.numel() != inp.numel()
                || mean.numel() != rows(inp) || rstd.numel() != rows(inp)) {
            throw error(op, "expected inp, out (N, C); weight, bias (C); mean, rstd (N)",
                    inp, weight, bias, out, mean, rstd);
        }
        return c;
    }

    /** LayerNorm backward: the forward's shapes (dout as out, dbias as bias), and dinp, dweight like inp, weight. */
    public static int layerNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                                        Tensor dinp, Tensor dweight, Tensor dbias) {
        String op = "layerNormBackward";
        int c = layerNorm(op, inp, weight, dbias, dout, mean, rstd);
        floating(op, dinp, dweight);
        sameNumel(op, inp, dinp);
        sameNumel(op, weight, dweight);
        return c;
    }

    /** RMSNorm: inp, out (N, C) and weight (C) floating; rstd (N) F32; eps positive; returns C. */
    public static int rmsNorm(String op, Tensor inp, Tensor weight, Tensor out, Tensor rstd, float eps) {
        floating(op, inp, weight, out);
        dtype(op, DType.F32, rstd);
        int c = lastDim(inp);
        if (weight.numel() != c || out.numel() != inp.numel() || rstd.numel() != rows(inp)) {
            throw error(op, "expected inp, out (N, C); weight (C); rstd (N)", inp, weight, out, rstd);
        }
        if (!(eps > 0) || !Float.isFinite(eps)) {
            throw error(op, "eps must be a positive number, got " + eps, inp);
        }
        return c;
    }

    /** RMSNorm backward: the forward's shapes (dout as out), and dinp, dweight like inp, weight. */
    public static int rmsNormBackward(Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp, Tensor dweight) {
        String op = "rmsNormBackward";
        int c = rmsNorm(op, inp, weight, dout, rstd, 1f);
        floating(op, dinp, dweight);
        sameNumel(op, inp, dinp);
        sameNumel(op, weight, dweight);
        return c;
    }

    /** Sizes of an embedding: B·T tokens of width C from a table of V rows. */
    public record EmbeddingSizes(int b, int t, int c, int vocab) {
    }

    /**
     * tokens (B, T) I32; table (V, C), positions (maxT ≥ T, C) or null (no position embedding) and
     * activations (B, T, C) floating.
     */
    public static EmbeddingSizes embedding(String op, Tensor tokens, Tensor table, Tensor positions, Tensor act) {
        Tensor[] all = positions == null ? new Tensor[] {tokens, table, act} : new Tensor[] {tokens, table, positions, act};
        floating(op, table, act);
        if (positions != null) {
            floating(op, positions);
        }
        dtype(op, DType.I32, tokens);
        if (tokens.rank() != 2 || table.rank() != 2 || act.rank() != 3
                || act.dim(0) != tokens.dim(0) || act.dim(1) != tokens.dim(1) || table.dim(1) != act.dim(2)
                || (positions != null && (positions.rank() != 2 || positions.dim(1) != act.dim(2)
                        || positions.dim(0) < tokens.dim(1)))) {
            throw error(op, "expected tokens (B, T), wte (V, C), wpe (maxT >= T, C) or none, activations (B, T, C)", all);
        }
        return new EmbeddingSizes(Math.toIntExact(act.dim(0)), Math.toIntExact(act.dim(1)),
                Math.toIntExact(act.dim(2)), Math.toIntExact(table.dim(0)));
    }

    /** Sizes of a token-major (B, T, C) ↔ head-major (B, H, T, hs) move, C = H·hs. */
    public record HeadLayout(long b, int t, int c, int heads, int hs) {

        public long tokens() {
            return b * t;
        }

        /** Element index of head h's row for token bt = b·T + t in the (B, H, T, hs) layout. */
        public long headRow(long bt, int h) {
            long bi = bt / t;
            long ti = bt % t;
            return ((bi * heads + h) * t + ti) * hs;
        }
    }

    /**
     * Sizes of a fused qkv (B, T, (H + 2·Hkv)·D) split into q (B, H, T, D) and k, v (B, Hkv, T, D):
     * H query heads, Hkv key/value heads (= H for multi-head attention).
     */
    public record QkvLayout(long b, int t, int heads, int kvHeads, int hs) {

        /** Elements per token of the fused qkv: (H + 2·Hkv)·D. */
        public int width() {
            return (heads + 2 * kvHeads) * hs;
        }

        /** The (B, H, T, D) layout of q. */
        public HeadLayout q() {
            return new HeadLayout(b, t, heads * hs, heads, hs);
        }

        /** The (B, Hkv, T, D) layout of k and v. */
        public HeadLayout kv() {
            return new HeadLayout(b, t, kvHeads * hs, kvHeads, hs);
        }
    }

    /** splitHeads and its backward: qkv (B, T, (H + 2·Hkv)·D), q (B, H, T, D), k, v (B, Hkv, T, D), all floating. */
    public static QkvLayout splitHeads(String op, Tensor qkv, Tensor q, Tensor k, Tensor v, int numHeads) {
        floating(op, qkv, q, k, v);
        if (qkv.rank() != 3 || q.rank() != 4 || numHeads < 1 || q.dim(1) != numHeads) {
            throw error(op, "expected qkv (B, T, (H + 2·Hkv)·D) and q (B, H, T, D) with H = numHeads=" + numHeads,
                    qkv, q, k, v);
        }
        long[] head = {qkv.dim(0), numHeads, qkv.dim(1), q.dim(3)};
        long[] kvHead = {qkv.dim(0), k.rank() == 4 ? k.dim(1) : -1, qkv.dim(1), q.dim(3)};
        if (!Arrays.equals(q.shape(), head) || !Arrays.equals(k.shape(), kvHead) || !Arrays.equals(v.shape(), kvHead)
                || kvHead[1] < 1 || qkv.dim(2) != (head[1] + 2 * kvHead[1]) * head[3]) {
            throw error(op, "expected qkv (B, T, (H + 2·Hkv)·D), q (B, H, T, D), k and v (B, Hkv, T, D)", qkv, q, k, v);
        }
        return new QkvLayout(qkv.dim(0), Math.toIntExact(qkv.dim(1)), numHeads, Math.toIntExact(kvHead[1]),
                Math.toIntExact(head[3]));
    }

    /** mergeHeads and its backward: heads (B, H, T, C/H), tokens (B, T, C), both floating. */
    public static HeadLayout mergeHeads(String op, Tensor heads, Tensor tokens) {
        floating(op, heads, tokens);
        if (heads.rank() != 4 || tokens.rank() != 3 || heads.dim(0) != tokens.dim(0) || heads.dim(2) != tokens.dim(1)
                || heads.dim(1) * heads.dim(3) != tokens.dim(2)) {
            throw error(op, "expected heads (B, H, T, C/H) and tokens (B, T, C)", heads, tokens);
        }
        return new HeadLayout(heads.dim(0), Math.toIntExact(heads.dim(2)), Math.toIntExact(tokens.dim(2)),
                Math.toIntExact(heads.dim(1)), Math.toIntExact(heads.dim(3)));
    }

    /** Sizes of a rotary embedding: rows = B·H·T of head size D, T positions, D/2 angles per position. */
    public record RopeSizes(long rows, int t, int halfDim) {
    }

    /** ropeForward / ropeBackward: inp, out (B, H, T, D) floating with D even; cos, sin (≥ T, D/2) F32. */
    public static RopeSizes rope(String op, Tensor inp, Tensor cos, Tensor sin, Tensor out) {
        floating(op, inp, out);
        dtype(op, DType.F32, cos, sin);
        if (inp.rank() != 4 || !Arrays.equals(inp.shape(), out.shape()) || inp.dim(3) % 2 != 0
                || cos.rank() != 2 || !Arrays.equals(cos.shape(), sin.shape()) || cos.dim(1) * 2 != inp.dim(3)
                || cos.dim(0) < inp.dim(2)) {
            throw error(op, "expected inp, out (B, H, T, D) with D even and cos, sin (>= T, D/2)", inp, cos, sin, out);
        }
        return new RopeSizes(inp.numel() / inp.dim(3), Math.toIntExact(inp.dim(2)), Math.toIntExact(inp.dim(3) / 2));
    }

    /** Sizes of a causal attention: batch, query heads H, key/value heads Hkv (dividing H), sequence, head size. */
    public record AttentionSizes(int b, int h, int kv, int t, int d) {
        /** Query heads per key/value head. */
        public int group() {
            return h / kv;
        }
    }

    /**
     * causalAttentionForward / Backward: q and every {@code qShaped} (B, H, T, D), k, v and every
     * {@code kvShaped} (B, Hkv, T, D) with Hkv dividing H, att (B, H, T, T), all floating.
     */
    public static AttentionSizes attention(String op, Tensor q, Tensor k, Tensor v, Tensor att, Tensor[] qShaped,
                                           Tensor... kvShaped) {
        return attention(op, false, q, k, v, att, qShaped, kvShaped);
    }

    /**
     * {@link #attention}, where att may also be the lower triangle (B, H, T·(T + 1)/2) (a backend
     * whose attention reads and writes either layout: Ops.causalAttentionSavedShape).
     */
    public static AttentionSizes attention(String op, boolean triangleToo, Tensor q, Tensor k, Tensor v, Tensor att,
                                           Tensor[] qShaped, Tensor... kvShaped) {
        floating(op, q, k, v, att);
        if (q.rank() != 4 || k.rank() != 4 || k.dim(1) < 1 || q.dim(1) % k.dim(1) != 0) {
            throw error(op, "expected q (B, H, T, D) and k, v (B, Hkv, T, D) with Hkv dividing H", q, k, v);
        }
        AttentionSizes s = new AttentionSizes(Math.toIntExact(q.dim(0)), Math.toIntExact(q.dim(1)),
                Math.toIntExact(k.dim(1)), Math.toIntExact(q.dim(2)), Math.toIntExact(q.dim(3)));
        long[] head = {s.b, s.h, s.t, s.d};
        long[] kvHead = {s.b, s.kv, s.t, s.d};
        boolean ok = Arrays.equals(k.shape(), kvHead) && Arrays.equals(v.shape(), kvHead)
                && attShaped(att, s, triangleToo);
        for (Tensor x : qShaped) {
            floating(op, x);
            ok &= Arrays.equals(x.shape(), head);
        }
        for (Tensor x : kvShaped) {
            floating(op, x);
            ok &= Arrays.equals(x.shape(), kvHead);
        }
        if (!ok) {
            throw error(op, "expected q and its gradients (B, H, T, D), k, v and theirs (B, Hkv, T, D), att (B, H, T, T)"
                    + (triangleToo ? " or (B, H, T·(T + 1)/2)" : ""), q, k, v, att);
        }
        return s;
    }

    /**
     * causalSelfAttentionForward / Backward: qkv and every {@code qkvShaped} (B, T, (H + 2·Hkv)·D)
     * with Hkv dividing H, att (B, H, T, T), y (B, T, H·D), all floating.
     */
    public static AttentionSizes selfAttention(String op, Tensor qkv, int numHeads, int numKvHeads, Tensor att,
                                               Tensor y, Tensor... qkvShaped) {
        return selfAttention(op, false, qkv, numHeads, numKvHeads, att, y, qkvShaped);
    }

    /** {@link #selfAttention}, where att may also be the lower triangle (B, H, T·(T + 1)/2). */
    public static AttentionSizes selfAttention(String op, boolean triangleToo, Tensor qkv, int numHeads, int numKvHeads,
                                               Tensor att, Tensor y, Tensor... qkvShaped) {
        floating(op, qkv, att, y);
        if (qkv.rank() != 3 || numHeads < 1 || numKvHeads < 1 || numHeads % numKvHeads != 0
                || qkv.dim(2) % (numHeads + 2L * numKvHeads) != 0) {
            throw error(op, "expected qkv (B, T, (H + 2·Hkv)·D) for H = " + numHeads + " heads and Hkv = " + numKvHeads
                    + " key/value heads dividing them", qkv);
        }
        AttentionSizes s = new AttentionSizes(Math.toIntExact(qkv.dim(0)), numHeads, numKvHeads,
                Math.toIntExact(qkv.dim(1)), Math.toIntExact(qkv.dim(2) / (numHeads + 2L * numKvHeads)));
        boolean ok = attShaped(att, s, triangleToo) && Arrays.equals(y.shape(), new long[] {s.b, s.t, (long) s.h * s.d});
        for (Tensor x : qkvShaped) {
            floating(op, x);
            ok &= Arrays.equals(x.shape(), qkv.shape());
        }
        if (!ok) {
            throw error(op, "expected att (B, H, T, T)" + (triangleToo ? " or (B, H, T·(T + 1)/2)" : "")
                    + ", y (B, T, H·D) and gradients shaped like qkv", qkv, att, y);
        }
        return s;
    }

    /** att is (B, H, T, T), or with {@code triangleToo} also the lower triangle (B, H, T·(T + 1)/2). */
    private static boolean attShaped(Tensor att, AttentionSizes s, boolean triangleToo) {
        return Arrays.equals(att.shape(), new long[] {s.b, s.h, s.t, s.t})
                || triangleToo && Arrays.equals(att.shape(), new long[] {s.b, s.h, lowerTriangle(s.t)});
    }

    /** Elements of a T×T matrix's lower triangle, diagonal included: T·(T + 1)/2. */
    public static long lowerTriangle(long t) {
        return t * (t + 1) / 2;
    }

    /** The causal softmax and its backward: floating (..., T, T) score matrices of equal numel; returns T. */
    public static int causalSoftmax(String op, Tensor... ts) {
        pointwise(op, ts);
        Tensor first = ts[0];
        if (first.rank() < 2 || first.dim(-1) != first.dim(-2)) {
            throw error(op, "expected (BH, T, T) score matrices", ts);
        }
        return Math.toIntExact(first.dim(-1));
    }

    /** crossEntropyForward: logits (N, V) floating, targets (N) I32, losses (N) F32; returns V. */
    public static int crossEntropyForward(Tensor logits, Tensor targets, Tensor losses) {
        String op = "crossEntropyForward";
        dtype(op, DType.F32, losses);
        int v = crossEntropy(op, logits, targets);
        if (losses.numel() != targets.numel()) {
            throw error(op, "expected logits (N, V), targets (N), losses (N)", logits, targets, losses);
        }
        return v;
    }

    /** crossEntropyBackward: logits (N, V) floating, targets (N) I32, dlogits floating like logits; returns V. */
    public static int crossEntropyBackward(Tensor logits, Tensor targets, Tensor dlogits) {
        String op = "crossEntropyBackward";
        floating(op, dlogits);
        sameNumel(op, logits, dlogits);
        return crossEntropy(op, logits, targets);
    }

    private static int crossEntropy(String op, Tensor logits, Tensor targets) {
        floating(op, logits);
        dtype(op, DType.I32, targets);
        if (logits.rank() < 2 || targets.numel() != rows(logits)) {
            throw error(op, "expected logits (N, V), targets (N)", logits, targets);
        }
        return lastDim(logits);
    }

    /** adamW / sgdMomentum: F32 parameter and state buffers, a floating gradient, all of one element count. */
    public static void optimizer(String op, Tensor param, Tensor grad, Tensor... state) {
        dtype(op, DType.F32, param);
        dtype(op, DType.F32, state);
        floating(op, grad);
        Tensor[] all = new Tensor[state.length + 2];
        all[0] = param;
        all[1] = grad;
        System.arraycopy(state, 0, all, 2, state.length);
        sameNumel(op, all);
    }
}
