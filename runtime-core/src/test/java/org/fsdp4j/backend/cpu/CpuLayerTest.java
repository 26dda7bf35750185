// The layer ops of the CPU backend (LayerNorm, embeddings, head moves, causal softmax,
// cross-entropy) against fp64 references written here; every backward is checked to ACCUMULATE
// into gradients pre-filled with random values, except crossEntropyBackward, which overwrites.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.junit.jupiter.api.Test;

class CpuLayerTest {

    static final DType[] FLOATS = CpuElementwiseTest.FLOATS;

    @Test
    void layerNormForwardAndBackward() {
        int n = 301;
        int c = 96;
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                double[][] x = new double[1][];
                double[][] w = new double[1][];
                double[][] b = new double[1][];
                double[][] g = new double[1][];
                double[][] dx = new double[1][];
                double[][] dw = new double[1][];
                double[][] db = new double[1][];
                try (Tensor tx = s.random(d, 2, x, n, c); Tensor tw = s.random(d, 1.5, w, c);
                     Tensor tb = s.random(d, 1, b, c); Tensor tg = s.random(d, 1, g, n, c);
                     Tensor tdx = s.random(d, 1, dx, n, c); Tensor tdw = s.random(d, 1, dw, c);
                     Tensor tdb = s.random(d, 1, db, c); Tensor out = s.poisoned(d, n, c);
                     Tensor mean = s.poisoned(DType.F32, n); Tensor rstd = s.poisoned(DType.F32, n)) {
                    double[] refOut = new double[n * c];
                    double[] refMean = new double[n];
                    double[] refRstd = new double[n];
                    double[] refDx = dx[0].clone();
                    double[] refDw = dw[0].clone();
                    double[] refDb = db[0].clone();
                    for (int r = 0; r < n; r++) {
                        double m = 0;
                        for (int j = 0; j < c; j++) {
                            m += x[0][r * c + j];
                        }
                        m /= c;
                        double var = 0;
                        for (int j = 0; j < c; j++) {
                            var += (x[0][r * c + j] - m) * (x[0][r * c + j] - m);
                        }
                        double rs = 1 / Math.sqrt(var / c + 1e-5);
                        refMean[r] = m;
                        refRstd[r] = rs;
                        // backward through y = xhat·w + b with xhat = (x − m)·rs, written out in full
                        double sumDxhat = 0;
                        double sumDxhatXhat = 0;
                        for (int j = 0; j < c; j++) {
                            double xhat = (x[0][r * c + j] - m) * rs;
                            refOut[r * c + j] = xhat * w[0][j] + b[0][j];
                            double dxhat = g[0][r * c + j] * w[0][j];
                            sumDxhat += dxhat;
                            sumDxhatXhat += dxhat * xhat;
                            refDw[j] += g[0][r * c + j] * xhat;
                            refDb[j] += g[0][r * c + j];
                        }
                        for (int j = 0; j < c; j++) {
                            double xhat = (x[0][r * c + j] - m) * rs;
                            double dxhat = g[0][r * c + j] * w[0][j];
                            refDx[r * c + j] += rs * (dxhat - sumDxhat / c - xhat * sumDxhatXhat / c);
                        }
                    }
                    s.backend.layerNormForward(tx, tw, tb, out, mean, rstd);
                    double rt = CpuTestSupport.rtol(d);
                    s.assertClose("layerNorm out " + d, refOut, out, 1e-5, rt);
                    s.assertClose("layerNorm mean " + d, refMean, mean, 1e-6, 1e-6);
                    s.assertClose("layerNorm rstd " + d, refRstd, rstd, 1e-6, 1e-6);
                    s.backend.layerNormBackward(tg, tx, tw, mean, rstd, tdx, tdw, tdb);
                    s.assertClose("layerNorm dinp " + d, refDx, tdx, 1e-4, rt);
                    s.assertClose("layerNorm dweight " + d, refDw, tdw, 1e-3, rt);
                    s.assertClose("layerNorm dbias " + d, refDb, tdb, 1e-3, rt);
                    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                            () -> s.backend.layerNormForward(tx, tw.view(0, c - 1), tb, out, mean, rstd));
                    assertTrue(e.getMessage().startsWith("layerNormForward"), e.getMessage());
                }
            }
        }
    }

    @Test
    void embeddingForwardAndDeterministicBackward() {
        int bsz = 3;
        int t = 17;
        int c = 40;
        int vocab = 11;   // small, so tokens repeat and the backward must sum them
        int maxT = 20;
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                int[] tok = new int[bsz * t];
                for (int i = 0; i < tok.length; i++) {
                    tok[i] = s.random.nextInt(vocab);
                }
                double[][] wte = new double[1][];
                double[][] wpe = new double[1][];
                double[][] g = new double[1][];
                double[][] dwte = new double[1][];
                double[][] dwpe = new double[1][];
                try (Tensor tt = s.ints(tok, bsz, t); Tensor twte = s.random(d, 1, wte, vocab, c);
                     Tensor twpe = s.random(d, 1, wpe, maxT, c); Tensor tg = s.random(d, 1, g, bsz, t, c);
                     Tensor tdwte = s.random(d, 1, dwte, vocab, c); Tensor tdwpe = s.random(d, 1, dwpe, maxT, c);
                     Tensor out = s.poisoned(d, bsz, t, c)) {
                    double[] ref = new double[bsz * t * c];
                    double[] refDwte = dwte[0].clone();
                    double[] refDwpe = dwpe[0].clone();
                    for (int p = 0; p < bsz * t; p++) {
                        for (int j = 0; j < c; j++) {
                            ref[p * c + j] = wte[0][tok[p] * c + j] + wpe[0][(p % t) * c + j];
                            refDwte[tok[p] * c + j] += g[0][p * c + j];
                            refDwpe[(p % t) * c + j] += g[0][p * c + j];
                        }
                    }
                    s.backend.embeddingForward(tt, twte, twpe, out);
                    double rt = CpuTestSupport.rtol(d);
                    s.assertClose("embedding out " + d, ref, out, 1e-6, rt);
                    s.backend.embeddingBackward(tt, tg, tdwte, tdwpe);
                    // bf16/fp16 gradients are rounded once per update, so the tolerance scales with the count
                    s.assertClose("embedding dwte " + d, refDwte, tdwte, 1e-5, rt * 2);
                    s.assertClose("embedding dwpe " + d, refDwpe, tdwpe, 1e-5, rt * 2);
                }
            }
            try (Tensor bad = s.ints(new int[] {0, 5}, 1, 2); Tensor wte = s.poisoned(DType.F32, 5, 4);
                 Tensor wpe = s.poisoned(DType.F32, 2, 4); Tensor out = s.poisoned(DType.F32, 1, 2, 4)) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> s.backend.embeddingForward(bad, wte, wpe, out));
                assertTrue(e.getMessage().contains("token 5 at position 1"), e.getMessage());
            }
        }
    }

    @Test
    void headSplitAndMergeAreInversesAndTheirBackwardsAccumulate() {
        int bsz = 2;
        int t = 9;
        int h = 3;
        int hs = 8;
        int c = h * hs;
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                double[][] qkv = new double[1][];
                double[][] dq = new double[1][];
                double[][] dk = new double[1][];
                double[][] dv = new double[1][];
                double[][] dqkv = new double[1][];
                try (Tensor tqkv = s.random(d, 1, qkv, bsz, t, 3 * c); Tensor q = s.poisoned(d, bsz, h, t, hs);
                     Tensor k = s.poisoned(d, bsz, h, t, hs); Tensor v = s.poisoned(d, bsz, h, t, hs);
                     Tensor tdq = s.random(d, 1, dq, bsz, h, t, hs); Tensor tdk = s.random(d, 1, dk, bsz, h, t, hs);
                     Tensor tdv = s.random(d, 1, dv, bsz, h, t, hs);
                     Tensor tdqkv = s.random(d, 1, dqkv, bsz, t, 3 * c); Tensor merged = s.poisoned(d, bsz, t, c)) {
                    s.backend.splitHeads(tqkv, q, k, v, h);
                    Tensor[] parts = {q, k, v};
                    double[][] grads = {dq[0], dk[0], dv[0]};
                    double[] refDqkv = dqkv[0].clone();
                    for (int part = 0; part < 3; part++) {
                        double[] ref = new double[bsz * h * t * hs];
                        for (int b = 0; b < bsz; b++) {
                            for (int hh = 0; hh < h; hh++) {
                                for (int tt = 0; tt < t; tt++) {
                                    for (int i = 0; i < hs; i++) {
                                        int headIdx = ((b * h + hh) * t + tt) * hs + i;
                                        int tokIdx = (b * t + tt) * 3 * c + part * c + hh * hs + i;
                                        ref[headIdx] = qkv[0][tokIdx];
                                        refDqkv[tokIdx] += grads[part][headIdx];
                                    }
                                }
                            }
                        }
                        s.assertClose("splitHeads part " + part + " " + d, ref, parts[part], 0, 0);
                    }
                    s.backend.splitHeadsBackward(tdq, tdk, tdv, tdqkv, h);
                    s.assertClose("splitHeadsBackward " + d, refDqkv, tdqkv, 1e-6, CpuTestSupport.rtol(d));

                    // merge(k) must be the k third of qkv; its backward adds dout back head-major
                    s.backend.mergeHeads(k, merged);
                    double[] refMerged = new double[bsz * t * c];
                    for (int p = 0; p < bsz * t; p++) {
                        System.arraycopy(qkv[0], p * 3 * c + c, refMerged, p * c, c);
                    }
                    s.assertClose("mergeHeads " + d, refMerged, merged, 0, 0);
                    double[] refDk = dk[0].clone();
                    double[] ks = s.read(k);
                    for (int i = 0; i < refDk.length; i++) {
                        refDk[i] += ks[i];
                    }
                    s.backend.mergeHeadsBackward(merged, tdk);
                    s.assertClose("mergeHeadsBackward " + d, refDk, tdk, 1e-6, CpuTestSupport.rtol(d));
                    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                            () -> s.backend.splitHeads(tqkv, q, k, v, 5));
                    assertTrue(e.getMessage().startsWith("splitHeads"), e.getMessage());
                }
            }
        }
    }

    @Test
    void causalSoftmaxForwardAndBackward() {
        int bh = 5;
        int t = 23;
        float scale = 0.37f;
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                double[][] pre = new double[1][];
                double[][] datt = new double[1][];
                double[][] dpre = new double[1][];
                try (Tensor tpre = s.random(d, 6, pre, bh, t, t); Tensor att = s.poisoned(d, bh, t, t);
                     Tensor tdatt = s.random(d, 1, datt, bh, t, t); Tensor tdpre = s.random(d, 1, dpre, bh, t, t)) {
                    s.backend.causalSoftmaxForward(tpre, att, scale);
                    double[] ref = new double[bh * t * t];
                    for (int r = 0; r < bh * t; r++) {
                        int i = r % t;
                        double max = Double.NEGATIVE_INFINITY;
                        for (int j = 0; j <= i; j++) {
                            max = Math.max(max, scale * pre[0][r * t + j]);
                        }
                        double sum = 0;
                        for (int j = 0; j <= i; j++) {
                            sum += Math.exp(scale * pre[0][r * t + j] - max);
                        }
                        for (int j = 0; j <= i; j++) {
                            ref[r * t + j] = Math.exp(scale * pre[0][r * t + j] - max) / sum;
                        }
                    }
                    double rt = CpuTestSupport.rtol(d);
                    s.assertClose("causalSoftmaxForward " + d, ref, att, 1e-6, rt);
                    // backward from the att the backend produced, via the softmax Jacobian in fp64
                    double[] a = s.read(att);
                    double[] refD = dpre[0].clone();
                    for (int r = 0; r < bh * t; r++) {
                        int i = r % t;
                        for (int j = 0; j <= i; j++) {
                            double acc = 0;
                            for (int l = 0; l <= i; l++) {
                                double jac = a[r * t + l] * ((l == j ? 1 : 0) - a[r * t + j]);
                                acc += datt[0][r * t + l] * jac;
                            }
                            refD[r * t + j] += scale * acc;
                        }
                    }
                    s.backend.causalSoftmaxBackward(att, tdatt, tdpre, scale);
                    s.assertClose("causalSoftmaxBackward " + d, refD, tdpre, 1e-5, rt);
                }
            }
        }
    }

    @Test
    void crossEntropyForwardAndBackwardInPlace() {
        int n = 37;
        int v = 301;
        float dloss = 1f / n;
        try (CpuTestSupport s = new CpuTestSupport()) {
            for (DType d : FLOATS) {
                int[] tgt = new int[n];
                for (int i = 0; i < n; i++) {
                    tgt[i] = s.random.nextInt(v);
                }
                double[][] x = new double[1][];
                try (Tensor logits = s.random(d, 8, x, n, v); Tensor targets = s.ints(tgt, n);
                     Tensor losses = s.poisoned(DType.F32, n); Tensor dlogits = s.poisoned(d, n, v)) {
                    double[] refLoss = new double[n];
                    double[] refD = new double[n * v];
                    for (int r = 0; r < n; r++) {
                        double max = Double.NEGATIVE_INFINITY;
                        for (int j = 0; j < v; j++) {
                            max = Math.max(max, x[0][r * v + j]);
                        }
                        double sum = 0;
                        for (int j = 0; j < v; j++) {
                            sum += Math.exp(x[0][r * v + j] - max);
                        }
                        refLoss[r] = Math.log(sum) + max - x[0][r * v + tgt[r]];
                        for (int j = 0; j < v; j++) {
                            refD[r * v + j] = (Math.exp(x[0][r * v + j] - max) / sum - (j == tgt[r] ? 1 : 0)) * dloss;
                        }
                    }
                    s.backend.crossEntropyForward(logits, targets, losses);
                    s.assertClose("crossEntropyForward " + d, refLoss, losses, 1e-5, 1e-5);
                    double rt = CpuTestSupport.rtol(d);
                    double at = 1e-9 + (d == DType.F16 ? 0x1p-25 : 0);   // fp16 flushes below 2^-25 to zero
                    s.backend.crossEntropyBackward(logits, targets, dloss, dlogits);
                    s.assertClose("crossEntropyBackward " + d, refD, dlogits, at, rt);
                    s.backend.crossEntropyBackward(logits, targets, dloss, logits);   // dlogits aliases logits
                    s.assertClose("crossEntropyBackward in place " + d, refD, logits, at, rt);
                    targets.close();
                    try (Tensor bad = s.ints(new int[n], n)) {
                        s.backend.fill(bad, v);
                        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                                () -> s.backend.crossEntropyForward(dlogits, bad, losses));
                        assertTrue(e.getMessage().contains("target " + v), e.getMessage());
                    }
                }
            }
        }
    }
}
