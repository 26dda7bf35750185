// Every Backend operation on fresh random inputs, against an fp64 reference written here,
// with outputs poisoned first. A subclass supplies the backend under test; each check also
// runs on the CPU backend (its twin), so CpuBackendConformanceTest proves these references
// on any machine and CudaBackendConformanceTest holds the GPU to the same bar. Backwards
// are checked to accumulate into gradients pre-filled with random values.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

abstract class BackendConformanceTest {

    static final DType[] FLOATS = {DType.F32, DType.BF16, DType.F16};

    final OpCheck c = new OpCheck();
    private final List<Backend> backends = new ArrayList<>();

    /** The backend under test; may skip the test (JUnit assumption) where it cannot run. */
    abstract Backend create(MemoryTracker tracker);

    @BeforeEach
    void open() {
        Backend under = create(new MemoryTracker("under-test"));
        backends.add(under);
        if (!under.device().isCpu()) {
            backends.add(Backends.create(Device.CPU, new MemoryTracker("cpu-twin"), 2));
        }
    }

    @AfterEach
    void close() {
        backends.forEach(Backend::close);
    }

    /** Runs {@code check} on the backend under test and on its CPU twin. */
    void onEach(Consumer<Backend> check) {
        backends.forEach(check);
    }

    @Test
    void fillCastAndHostCopies() {
        onEach(be -> {
            for (DType from : FLOATS) {
                double[] v = c.values(from, 1001, 3);
                for (DType to : FLOATS) {
                    double[] ref = new double[v.length];
                    for (int i = 0; i < v.length; i++) {
                        ref[i] = to.round((float) v[i]);
                    }
                    try (Tensor src = OpCheck.put(be, from, v, v.length); Tensor dst = OpCheck.poisoned(be, to, v.length)) {
                        be.copy(src, dst);
                        c.assertClose("copy " + from + "→" + to, ref, be, dst, 0, 0);
                    }
                }
                try (Tensor t = OpCheck.poisoned(be, from, 7, 5)) {
                    be.fill(t, 1.7f);
                    double[] ref = new double[35];
                    java.util.Arrays.fill(ref, from.round(1.7f));
                    c.assertClose("fill " + from, ref, be, t, 0, 0);
                }
            }
            int[] tokens = c.random.ints(333, -5000, 5000).toArray();
            try (Tensor t = OpCheck.ints(be, tokens, 333); Tensor u = be.allocate(DType.I32,
                    org.fsdp4j.api.MemoryCategory.ACTIVATIONS, 333)) {
                be.copy(t, u);
                int[] back = new int[335];
                be.copyToHost(u, back, 2);
                assertEquals(java.util.Arrays.toString(tokens),
                        java.util.Arrays.toString(java.util.Arrays.copyOfRange(back, 2, 335)), "int32 round trip");
            }
        });
    }

    @Test
    void gemmEveryTransposeDtypeAndBatch() {
        for (int batch : new int[] {1, 3}) {   // one GEMM (cublasGemmEx on CUDA) and a strided batch
            gemmEveryTransposeAndDtype(batch);
        }
    }

    private void gemmEveryTransposeAndDtype(int batch) {
        int m = 33, n = 47, k = 29;
        float alpha = 0.7f, beta = 0.3f;
        DType[][] triples = {{DType.F32, DType.F32, DType.F32}, {DType.BF16, DType.BF16, DType.BF16},
            {DType.BF16, DType.BF16, DType.F32}, {DType.F16, DType.F16, DType.F16}, {DType.F16, DType.F16, DType.F32},
            {DType.F32, DType.BF16, DType.F32}};
        onEach(be -> {
            for (DType[] dt : triples) {
                for (int tr = 0; tr < 4; tr++) {
                    boolean ta = (tr & 1) != 0, tb = (tr & 2) != 0;
                    // stored shapes with padded leading dims and gaps between batch entries
                    int aRows = ta ? k : m, aCols = ta ? m : k, bRows = tb ? n : k, bCols = tb ? k : n;
                    int lda = aCols + 3, ldb = bCols + 1, ldc = n + 2;
                    long sA = (long) aRows * lda + 5, sB = (long) bRows * ldb + 2, sC = (long) m * ldc + 7;
                    double[] a = c.values(dt[0], (int) (sA * batch), 1);
                    double[] b = c.values(dt[1], (int) (sB * batch), 1);
                    double[] c0 = c.values(dt[2], (int) (sC * batch), 1);
                    double[] ref = c0.clone();
                    for (int bi = 0; bi < batch; bi++) {
                        for (int i = 0; i < m; i++) {
                            for (int j = 0; j < n; j++) {
                                double s = 0;
                                for (int p = 0; p < k; p++) {
                                    double av = ta ? a[(int) (bi * sA + (long) p * lda + i)] : a[(int) (bi * sA + (long) i * lda + p)];
                                    double bv = tb ? b[(int) (bi * sB + (long) j * ldb + p)] : b[(int) (bi * sB + (long) p * ldb + j)];
                                    s += av * bv;
                                }
                                int ci = (int) (bi * sC + (long) i * ldc + j);
                                ref[ci] = dt[2].round((float) (alpha * s + beta * c0[ci]));
                            }
                        }
                    }
                    try (Tensor ta_ = OpCheck.put(be, dt[0], a, a.length); Tensor tb_ = OpCheck.put(be, dt[1], b, b.length);
                         Tensor tc = OpCheck.put(be, dt[2], c0, c0.length)) {
                        be.gemm(ta, tb, m, n, k, alpha, ta_, lda, sA, tb_, ldb, sB, beta, tc, ldc, sC, batch);
                        String what = "gemm " + (ta ? "T" : "N") + (tb ? "T" : "N") + " " + dt[0] + "×" + dt[1] + "→" + dt[2]
                                + " ×" + batch;
                        // fp32 accumulation over k terms of size ≤ 1, then one rounding to C's dtype
                        c.assertClose(what, ref, be, tc, 1e-4, OpCheck.rtol(dt[2]));
                    }
                }
            }
        });
    }

    @Test
    void addScaleBiasAndGelu() {
        int rows = 37, cols = 53, nel = rows * cols;
        onEach(be -> {
            for (DType d : FLOATS) {
                double rt = OpCheck.rtol(d);
                double[] x = c.values(d, nel, 3), y = c.values(DType.F32, nel, 3), bias = c.values(d, cols, 1);
                double[] g = c.values(d, nel, 1), dx0 = c.values(d, nel, 1), db0 = c.values(d, cols, 1);
                try (Tensor tx = OpCheck.put(be, d, x, rows, cols); Tensor ty = OpCheck.put(be, DType.F32, y, rows, cols);
                     Tensor tb = OpCheck.put(be, d, bias, cols); Tensor tg = OpCheck.put(be, d, g, rows, cols);
                     Tensor tdx = OpCheck.put(be, d, dx0, rows, cols); Tensor tdb = OpCheck.put(be, d, db0, cols);
                     Tensor out = OpCheck.poisoned(be, d, rows, cols)) {
                    double[] ref = new double[nel];
                    for (int i = 0; i < nel; i++) {
                        ref[i] = x[i] + y[i];
                    }
                    be.add(tx, ty, out);
                    c.assertClose("add " + d, ref, be, out, 1e-6, rt);
                    be.scale(out, -0.5f);
                    for (int i = 0; i < nel; i++) {
                        ref[i] = d.round((float) ref[i]) * -0.5;
                    }
                    c.assertClose("scale " + d, ref, be, out, 1e-6, rt);
                    double[] withBias = OpCheck.read(be, out);
                    for (int i = 0; i < nel; i++) {
                        withBias[i] += bias[i % cols];
                    }
                    be.addBias(out, tb);
                    c.assertClose("addBias " + d, withBias, be, out, 1e-6, rt);
                    try (Tensor set = OpCheck.poisoned(be, d, rows, cols)) {
                        double[] refSet = new double[nel];
                        for (int i = 0; i < nel; i++) {
                            refSet[i] = d.round((float) bias[i % cols]);
                        }
                        be.setBias(set, tb);
                        c.assertClose("setBias " + d, refSet, be, set, 0, 0);
                    }
                    double[] refDb = db0.clone();
                    for (int i = 0; i < nel; i++) {
                        refDb[i % cols] += g[i];
                    }
                    be.biasBackward(tg, tdb);
                    c.assertClose("biasBackward " + d, refDb, be, tdb, 1e-4, 2 * rt);
                    double[] refGelu = new double[nel];
                    double[] refDx = dx0.clone();
                    double s2 = Math.sqrt(2 / Math.PI);
                    for (int i = 0; i < nel; i++) {
                        double u = s2 * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
                        double th = Math.tanh(u);
                        refGelu[i] = 0.5 * x[i] * (1 + th);
                        double grad = 0.5 * (1 + th) + 0.5 * x[i] * (1 - th * th) * s2 * (1 + 3 * 0.044715 * x[i] * x[i]);
                        refDx[i] += grad * g[i];
                    }
                    be.geluForward(tx, out);
                    c.assertClose("geluForward " + d, refGelu, be, out, 1e-6, rt);
                    be.geluBackward(tx, tg, tdx);
                    c.assertClose("geluBackward " + d, refDx, be, tdx, 1e-5, 2 * rt);
                }
            }
        });
    }

    @Test
    void layerNormForwardAndBackward() {
        int n = 301, ch = 96;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] x = c.values(d, n * ch, 2), w = c.values(d, ch, 1.5), b = c.values(d, ch, 1);
                double[] g = c.values(d, n * ch, 1), dx = c.values(d, n * ch, 1), dw = c.values(d, ch, 1);
                double[] db = c.values(d, ch, 1);
                double[] refOut = new double[n * ch], refMean = new double[n], refRstd = new double[n];
                double[] refDx = dx.clone(), refDw = dw.clone(), refDb = db.clone();
                for (int r = 0; r < n; r++) {
                    double m = 0, var = 0;
                    for (int j = 0; j < ch; j++) {
                        m += x[r * ch + j];
                    }
                    m /= ch;
                    for (int j = 0; j < ch; j++) {
                        var += (x[r * ch + j] - m) * (x[r * ch + j] - m);
                    }
                    double rs = 1 / Math.sqrt(var / ch + 1e-5);
                    refMean[r] = m;
                    refRstd[r] = rs;
                    double sumG = 0, sumGX = 0;
                    for (int j = 0; j < ch; j++) {
                        double xh = (x[r * ch + j] - m) * rs;
                        refOut[r * ch + j] = xh * w[j] + b[j];
                        double gw = g[r * ch + j] * w[j];
                        sumG += gw;
                        sumGX += gw * xh;
                        refDw[j] += g[r * ch + j] * xh;
                        refDb[j] += g[r * ch + j];
                    }
                    for (int j = 0; j < ch; j++) {
                        double xh = (x[r * ch + j] - m) * rs;
                        refDx[r * ch + j] += rs * (g[r * ch + j] * w[j] - sumG / ch - xh * sumGX / ch);
                    }
                }
                double rt = OpCheck.rtol(d);
                try (Tensor tx = OpCheck.put(be, d, x, n, ch); Tensor tw = OpCheck.put(be, d, w, ch);
                     Tensor tb = OpCheck.put(be, d, b, ch); Tensor tg = OpCheck.put(be, d, g, n, ch);
                     Tensor tdx = OpCheck.put(be, d, dx, n, ch); Tensor tdw = OpCheck.put(be, d, dw, ch);
                     Tensor tdb = OpCheck.put(be, d, db, ch); Tensor out = OpCheck.poisoned(be, d, n, ch);
                     Tensor mean = OpCheck.poisoned(be, DType.F32, n); Tensor rstd = OpCheck.poisoned(be, DType.F32, n)) {
                    be.layerNormForward(tx, tw, tb, out, mean, rstd);
                    c.assertClose("layerNorm out " + d, refOut, be, out, 1e-5, rt);
                    c.assertClose("layerNorm mean " + d, refMean, be, mean, 1e-6, 1e-5);
                    c.assertClose("layerNorm rstd " + d, refRstd, be, rstd, 1e-6, 1e-5);
                    be.layerNormBackward(tg, tx, tw, mean, rstd, tdx, tdw, tdb);
                    c.assertClose("layerNorm dinp " + d, refDx, be, tdx, 1e-4, 2 * rt);
                    c.assertClose("layerNorm dweight " + d, refDw, be, tdw, 1e-3, 2 * rt);
                    c.assertClose("layerNorm dbias " + d, refDb, be, tdb, 1e-3, 2 * rt);
                }
            }
        });
    }

    @Test
    void rmsNormForwardAndBackward() {
        int n = 301, ch = 96;
        float eps = 1e-6f;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] x = c.values(d, n * ch, 2), w = c.values(d, ch, 1.5);
                double[] g = c.values(d, n * ch, 1), dx = c.values(d, n * ch, 1), dw = c.values(d, ch, 1);
                double[] refOut = new double[n * ch], refRstd = new double[n];
                double[] refDx = dx.clone(), refDw = dw.clone();
                for (int r = 0; r < n; r++) {
                    double ss = 0;
                    for (int j = 0; j < ch; j++) {
                        ss += x[r * ch + j] * x[r * ch + j];
                    }
                    double rs = 1 / Math.sqrt(ss / ch + eps);
                    refRstd[r] = rs;
                    double sumGX = 0;
                    for (int j = 0; j < ch; j++) {
                        double xh = x[r * ch + j] * rs;
                        refOut[r * ch + j] = xh * w[j];
                        sumGX += g[r * ch + j] * w[j] * xh;
                        refDw[j] += g[r * ch + j] * xh;
                    }
                    for (int j = 0; j < ch; j++) {
                        double xh = x[r * ch + j] * rs;
                        refDx[r * ch + j] += rs * (g[r * ch + j] * w[j] - xh * sumGX / ch);
                    }
                }
                double rt = OpCheck.rtol(d);
                try (Tensor tx = OpCheck.put(be, d, x, n, ch); Tensor tw = OpCheck.put(be, d, w, ch);
                     Tensor tg = OpCheck.put(be, d, g, n, ch); Tensor tdx = OpCheck.put(be, d, dx, n, ch);
                     Tensor tdw = OpCheck.put(be, d, dw, ch); Tensor out = OpCheck.poisoned(be, d, n, ch);
                     Tensor rstd = OpCheck.poisoned(be, DType.F32, n)) {
                    be.rmsNormForward(tx, tw, out, rstd, eps);
                    c.assertClose("rmsNorm out " + d, refOut, be, out, 1e-5, rt);
                    c.assertClose("rmsNorm rstd " + d, refRstd, be, rstd, 1e-6, 1e-5);
                    be.rmsNormBackward(tg, tx, tw, rstd, tdx, tdw);
                    c.assertClose("rmsNorm dinp " + d, refDx, be, tdx, 1e-4, 2 * rt);
                    c.assertClose("rmsNorm dweight " + d, refDw, be, tdw, 1e-3, 2 * rt);
                }
            }
        });
    }

    @Test
    void swigluForwardAndBackward() {
        int nel = 37 * 53;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] gate = c.values(d, nel, 6), up = c.values(d, nel, 3), g = c.values(d, nel, 1);
                double[] dg0 = c.values(d, nel, 1), du0 = c.values(d, nel, 1);
                double[] ref = new double[nel], refDg = dg0.clone(), refDu = du0.clone();
                for (int i = 0; i < nel; i++) {
                    double s = 1 / (1 + Math.exp(-gate[i]));
                    ref[i] = gate[i] * s * up[i];
                    refDg[i] += g[i] * up[i] * s * (1 + gate[i] * (1 - s));
                    refDu[i] += g[i] * gate[i] * s;
                }
                double rt = OpCheck.rtol(d);
                try (Tensor tgate = OpCheck.put(be, d, gate, nel); Tensor tup = OpCheck.put(be, d, up, nel);
                     Tensor tg = OpCheck.put(be, d, g, nel); Tensor tdg = OpCheck.put(be, d, dg0, nel);
                     Tensor tdu = OpCheck.put(be, d, du0, nel); Tensor out = OpCheck.poisoned(be, d, nel)) {
                    be.swigluForward(tgate, tup, out);
                    c.assertClose("swigluForward " + d, ref, be, out, 1e-6, rt);
                    be.swigluBackward(tgate, tup, tg, tdg, tdu);
                    c.assertClose("swigluBackward dgate " + d, refDg, be, tdg, 1e-5, 2 * rt);
                    c.assertClose("swigluBackward dup " + d, refDu, be, tdu, 1e-5, 2 * rt);
                }
            }
        });
    }

    @Test
    void ropeForwardBackwardAndInPlace() {
        int bsz = 2, h = 3, t = 9, hs = 10, half = hs / 2, positions = t + 3;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] x = c.values(d, bsz * h * t * hs, 2);
                double[] cos = new double[positions * half], sin = new double[positions * half];
                for (int p = 0; p < positions; p++) {
                    for (int i = 0; i < half; i++) {
                        double angle = p * Math.pow(10000, -2.0 * i / hs);   // Llama's angles
                        cos[p * half + i] = (float) Math.cos(angle);
                        sin[p * half + i] = (float) Math.sin(angle);
                    }
                }
                double[] fwd = new double[x.length], bwd = new double[x.length];
                for (int row = 0; row < bsz * h * t; row++) {
                    int p = row % t;
                    for (int i = 0; i < half; i++) {
                        double x1 = x[row * hs + i], x2 = x[row * hs + i + half];
                        double cs = cos[p * half + i], sn = sin[p * half + i];
                        fwd[row * hs + i] = x1 * cs - x2 * sn;
                        fwd[row * hs + i + half] = x2 * cs + x1 * sn;
                        bwd[row * hs + i] = x1 * cs + x2 * sn;
                        bwd[row * hs + i + half] = x2 * cs - x1 * sn;
                    }
                }
                double rt = OpCheck.rtol(d);
                try (Tensor tx = OpCheck.put(be, d, x, bsz, h, t, hs); Tensor tc = OpCheck.put(be, DType.F32, cos, positions, half);
                     Tensor ts = OpCheck.put(be, DType.F32, sin, positions, half);
                     Tensor out = OpCheck.poisoned(be, d, bsz, h, t, hs)) {
                    be.ropeForward(tx, tc, ts, out);
                    c.assertClose("ropeForward " + d, fwd, be, out, 1e-6, rt);
                    be.ropeBackward(tx, tc, ts, out);   // overwrites
                    c.assertClose("ropeBackward " + d, bwd, be, out, 1e-6, rt);
                    be.ropeForward(tx, tc, ts, tx);     // in place
                    c.assertClose("ropeForward in place " + d, fwd, be, tx, 1e-6, rt);
                }
            }
        });
    }

    @Test
    void embeddingWithoutPositions() {
        int bsz = 2, t = 7, ch = 40, vocab = 5;
        onEach(be -> {
            for (DType d : FLOATS) {
                int[] tok = c.random.ints(bsz * t, 0, vocab).toArray();
                double[] wte = c.values(d, vocab * ch, 1), g = c.values(d, bsz * t * ch, 1), dwte = c.values(d, vocab * ch, 1);
                double[] ref = new double[bsz * t * ch], refDwte = dwte.clone();
                for (int p = 0; p < bsz * t; p++) {
                    for (int j = 0; j < ch; j++) {
                        ref[p * ch + j] = wte[tok[p] * ch + j];
                        refDwte[tok[p] * ch + j] += g[p * ch + j];
                    }
                }
                try (Tensor tt = OpCheck.ints(be, tok, bsz, t); Tensor twte = OpCheck.put(be, d, wte, vocab, ch);
                     Tensor tg = OpCheck.put(be, d, g, bsz, t, ch); Tensor tdwte = OpCheck.put(be, d, dwte, vocab, ch);
                     Tensor out = OpCheck.poisoned(be, d, bsz, t, ch)) {
                    be.embeddingForward(tt, twte, null, out);
                    c.assertClose("embedding without positions out " + d, ref, be, out, 0, 0);
                    be.embeddingBackward(tt, tg, tdwte, null);
                    c.assertClose("embedding without positions dwte " + d, refDwte, be, tdwte, 1e-5, 2 * OpCheck.rtol(d));
                }
            }
        });
    }

    @Test
    void embeddingForwardAndBackward() {
        int bsz = 3, t = 17, ch = 300, vocab = 11, maxT = 20;   // few tokens: the backward must sum repeats
        onEach(be -> {
            for (DType d : FLOATS) {
                int[] tok = c.random.ints(bsz * t, 0, vocab).toArray();
                double[] wte = c.values(d, vocab * ch, 1), wpe = c.values(d, maxT * ch, 1);
                double[] g = c.values(d, bsz * t * ch, 1), dwte = c.values(d, vocab * ch, 1);
                double[] dwpe = c.values(d, maxT * ch, 1);
                double[] ref = new double[bsz * t * ch], refDwte = dwte.clone(), refDwpe = dwpe.clone();
                for (int p = 0; p < bsz * t; p++) {
                    for (int j = 0; j < ch; j++) {
                        ref[p * ch + j] = wte[tok[p] * ch + j] + wpe[(p % t) * ch + j];
                        refDwte[tok[p] * ch + j] += g[p * ch + j];
                        refDwpe[(p % t) * ch + j] += g[p * ch + j];
                    }
                }
                double rt = OpCheck.rtol(d);
                try (Tensor tt = OpCheck.ints(be, tok, bsz, t); Tensor twte = OpCheck.put(be, d, wte, vocab, ch);
                     Tensor twpe = OpCheck.put(be, d, wpe, maxT, ch); Tensor tg = OpCheck.put(be, d, g, bsz, t, ch);
                     Tensor tdwte = OpCheck.put(be, d, dwte, vocab, ch); Tensor tdwpe = OpCheck.put(be, d, dwpe, maxT, ch);
                     Tensor out = OpCheck.poisoned(be, d, bsz, t, ch)) {
                    be.embeddingForward(tt, twte, twpe, out);
                    c.assertClose("embedding out " + d, ref, be, out, 1e-6, rt);
                    be.embeddingBackward(tt, tg, tdwte, tdwpe);
                    c.assertClose("embedding dwte " + d, refDwte, be, tdwte, 1e-5, 2 * rt);
                    c.assertClose("embedding dwpe " + d, refDwpe, be, tdwpe, 1e-5, 2 * rt);
                }
            }
        });
    }

    @Test
    void headSplitMergeAndTheirBackwards() {
        int bsz = 2, t = 9, h = 3, hs = 8, ch = h * hs;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] qkv = c.values(d, bsz * t * 3 * ch, 1), dqkv = c.values(d, bsz * t * 3 * ch, 1);
                double[][] dh = {c.values(d, bsz * h * t * hs, 1), c.values(d, bsz * h * t * hs, 1),
                    c.values(d, bsz * h * t * hs, 1)};
                double[][] refHeads = new double[3][bsz * h * t * hs];
                double[] refDqkv = dqkv.clone();
                double[] refMerged = new double[bsz * t * ch];
                for (int b = 0; b < bsz; b++) {
                    for (int hh = 0; hh < h; hh++) {
                        for (int tt = 0; tt < t; tt++) {
                            for (int i = 0; i < hs; i++) {
                                int head = ((b * h + hh) * t + tt) * hs + i;
                                for (int part = 0; part < 3; part++) {
                                    int tokIdx = (b * t + tt) * 3 * ch + part * ch + hh * hs + i;
                                    refHeads[part][head] = qkv[tokIdx];
                                    refDqkv[tokIdx] += dh[part][head];
                                }
                                refMerged[(b * t + tt) * ch + hh * hs + i] = dh[0][head];
                            }
                        }
                    }
                }
                double rt = OpCheck.rtol(d);
                try (Tensor tqkv = OpCheck.put(be, d, qkv, bsz, t, 3 * ch); Tensor tdqkv = OpCheck.put(be, d, dqkv, bsz, t, 3 * ch);
                     Tensor q = OpCheck.poisoned(be, d, bsz, h, t, hs); Tensor k = OpCheck.poisoned(be, d, bsz, h, t, hs);
                     Tensor v = OpCheck.poisoned(be, d, bsz, h, t, hs);
                     Tensor dq = OpCheck.put(be, d, dh[0], bsz, h, t, hs); Tensor dk = OpCheck.put(be, d, dh[1], bsz, h, t, hs);
                     Tensor dv = OpCheck.put(be, d, dh[2], bsz, h, t, hs); Tensor merged = OpCheck.poisoned(be, d, bsz, t, ch)) {
                    be.splitHeads(tqkv, q, k, v, h);
                    c.assertClose("splitHeads q " + d, refHeads[0], be, q, 0, 0);
                    c.assertClose("splitHeads k " + d, refHeads[1], be, k, 0, 0);
                    c.assertClose("splitHeads v " + d, refHeads[2], be, v, 0, 0);
                    be.splitHeadsBackward(dq, dk, dv, tdqkv, h);
                    c.assertClose("splitHeadsBackward " + d, refDqkv, be, tdqkv, 1e-6, rt);
                    be.mergeHeads(dq, merged);
                    c.assertClose("mergeHeads " + d, refMerged, be, merged, 0, 0);
                    double[] refDk = dh[1].clone();
                    for (int i = 0; i < refDk.length; i++) {
                        refDk[i] += dh[0][i];      // merge then un-merge dq: dk += dq, element for element
                    }
                    be.mergeHeadsBackward(merged, dk);
                    c.assertClose("mergeHeadsBackward " + d, refDk, be, dk, 1e-6, rt);
                }
            }
        });
    }

    @Test
    void groupedQueryHeadSplitAndItsBackward() {
        int bsz = 2, t = 5, h = 4, kv = 2, hs = 6, w = (h + 2 * kv) * hs;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] qkv = c.values(d, bsz * t * w, 1), dqkv = c.values(d, bsz * t * w, 1);
                double[] dq = c.values(d, bsz * h * t * hs, 1), dk = c.values(d, bsz * kv * t * hs, 1);
                double[] dv = c.values(d, bsz * kv * t * hs, 1);
                double[] refQ = new double[dq.length], refK = new double[dk.length], refV = new double[dv.length];
                double[] refDqkv = dqkv.clone();
                for (int b = 0; b < bsz; b++) {
                    for (int tt = 0; tt < t; tt++) {
                        for (int col = 0; col < w; col++) {
                            int part = col < h * hs ? 0 : (col < (h + kv) * hs ? 1 : 2);
                            int within = part == 0 ? col : col - (h + (part - 1) * kv) * hs;
                            int heads = part == 0 ? h : kv;
                            int head = ((b * heads + within / hs) * t + tt) * hs + within % hs;
                            int tok = (b * t + tt) * w + col;
                            double[] dst = part == 0 ? refQ : (part == 1 ? refK : refV);
                            double[] grad = part == 0 ? dq : (part == 1 ? dk : dv);
                            dst[head] = qkv[tok];
                            refDqkv[tok] += grad[head];
                        }
                    }
                }
                try (Tensor tqkv = OpCheck.put(be, d, qkv, bsz, t, w); Tensor tdqkv = OpCheck.put(be, d, dqkv, bsz, t, w);
                     Tensor q = OpCheck.poisoned(be, d, bsz, h, t, hs); Tensor k = OpCheck.poisoned(be, d, bsz, kv, t, hs);
                     Tensor v = OpCheck.poisoned(be, d, bsz, kv, t, hs); Tensor tdq = OpCheck.put(be, d, dq, bsz, h, t, hs);
                     Tensor tdk = OpCheck.put(be, d, dk, bsz, kv, t, hs); Tensor tdv = OpCheck.put(be, d, dv, bsz, kv, t, hs)) {
                    be.splitHeads(tqkv, q, k, v, h);
                    c.assertClose("grouped-query splitHeads q " + d, refQ, be, q, 0, 0);
                    c.assertClose("grouped-query splitHeads k " + d, refK, be, k, 0, 0);
                    c.assertClose("grouped-query splitHeads v " + d, refV, be, v, 0, 0);
                    be.splitHeadsBackward(tdq, tdk, tdv, tdqkv, h);
                    c.assertClose("grouped-query splitHeadsBackward " + d, refDqkv, be, tdqkv, 1e-6, OpCheck.rtol(d));
                }
            }
        });
    }

    @Test
    void causalSoftmaxForwardAndBackward() {
        int bh = 5, t = 70;   // rows longer than a warp
        float scale = 0.35f;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] pre = c.values(d, bh * t * t, 4), datt = c.values(d, bh * t * t, 1);
                double[] dpre = c.values(d, bh * t * t, 1);
                double[] att = new double[bh * t * t];
                double[] refDpre = dpre.clone();
                for (int r = 0; r < bh * t; r++) {
                    int i = r % t, base = r * t;
                    double mx = Double.NEGATIVE_INFINITY, s = 0;
                    for (int j = 0; j <= i; j++) {
                        mx = Math.max(mx, scale * pre[base + j]);
                    }
                    for (int j = 0; j <= i; j++) {
                        s += Math.exp(scale * pre[base + j] - mx);
                    }
                    for (int j = 0; j <= i; j++) {
                        att[base + j] = Math.exp(scale * pre[base + j] - mx) / s;
                    }
                }
                double[] attStored = new double[att.length];   // what the backward reads back
                for (int i = 0; i < att.length; i++) {
                    attStored[i] = d.round((float) att[i]);
                }
                for (int r = 0; r < bh * t; r++) {
                    int i = r % t, base = r * t;
                    double dot = 0;
                    for (int j = 0; j <= i; j++) {
                        dot += attStored[base + j] * datt[base + j];
                    }
                    for (int j = 0; j <= i; j++) {
                        refDpre[base + j] += scale * attStored[base + j] * (datt[base + j] - dot);
                    }
                }
                double rt = OpCheck.rtol(d);
                try (Tensor tpre = OpCheck.put(be, d, pre, bh, t, t); Tensor tatt = OpCheck.poisoned(be, d, bh, t, t);
                     Tensor tdatt = OpCheck.put(be, d, datt, bh, t, t); Tensor tdpre = OpCheck.put(be, d, dpre, bh, t, t)) {
                    be.causalSoftmaxForward(tpre, tatt, scale);
                    c.assertClose("causalSoftmaxForward " + d, att, be, tatt, 1e-6, rt);
                    be.causalSoftmaxBackward(tatt, tdatt, tdpre, scale);
                    c.assertClose("causalSoftmaxBackward " + d, refDpre, be, tdpre, 1e-5, 2 * rt);
                }
            }
        });
    }

    @Test
    void crossEntropyForwardAndBackwardInPlace() {
        int n = 13, vocab = 1037;   // rows longer than a block
        float dloss = 1f / n;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] logits = c.values(d, n * vocab, 3);
                int[] targets = c.random.ints(n, 0, vocab).toArray();
                double[] refLoss = new double[n], refGrad = new double[n * vocab];
                for (int r = 0; r < n; r++) {
                    double mx = Double.NEGATIVE_INFINITY, s = 0;
                    for (int j = 0; j < vocab; j++) {
                        mx = Math.max(mx, logits[r * vocab + j]);
                    }
                    for (int j = 0; j < vocab; j++) {
                        s += Math.exp(logits[r * vocab + j] - mx);
                    }
                    refLoss[r] = Math.log(s) + mx - logits[r * vocab + targets[r]];
                    for (int j = 0; j < vocab; j++) {
                        double p = Math.exp(logits[r * vocab + j] - mx) / s;
                        refGrad[r * vocab + j] = (p - (j == targets[r] ? 1 : 0)) * dloss;
                    }
                }
                try (Tensor tl = OpCheck.put(be, d, logits, n, vocab); Tensor tt = OpCheck.ints(be, targets, n);
                     Tensor losses = OpCheck.poisoned(be, DType.F32, n)) {
                    be.crossEntropyForward(tl, tt, losses);
                    c.assertClose("crossEntropyForward " + d, refLoss, be, losses, 1e-5, 1e-5);
                    be.crossEntropyBackward(tl, tt, dloss, tl);   // dlogits aliases logits
                    c.assertClose("crossEntropyBackward (in place) " + d, refGrad, be, tl, 1e-7, OpCheck.rtol(d));
                }
            }
        });
    }

    @Test
    void adamWAndSgdMomentum() {
        int nel = 5000;
        AdamWStep step = new AdamWStep(3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4, 0.5f);
        onEach(be -> {
            for (DType gd : FLOATS) {
                double[] p = c.values(DType.F32, nel, 1), g = c.values(gd, nel, 2);
                double[] m = c.values(DType.F32, nel, 0.1), v = c.values(DType.F32, nel, 0.01);
                for (int i = 0; i < nel; i++) {
                    v[i] = Math.abs(v[i]);
                }
                double[] refP = p.clone(), refM = m.clone(), refV = v.clone(), refP2 = p.clone(), refBuf = m.clone();
                double bc1 = 1 - Math.pow(0.9, 4), bc2 = 1 - Math.pow(0.95, 4);
                for (int i = 0; i < nel; i++) {
                    double gi = 0.5 * g[i];
                    refM[i] = 0.9 * m[i] + 0.1 * gi;
                    refV[i] = 0.95 * v[i] + 0.05 * gi * gi;
                    refP[i] = p[i] - 3e-3 * (refM[i] / bc1 / (Math.sqrt(refV[i] / bc2) + 1e-8) + 0.1 * p[i]);
                    double sg = 0.5 * g[i] + 0.01 * p[i];
                    refBuf[i] = 0.9 * m[i] + sg;
                    refP2[i] = p[i] - 0.05 * refBuf[i];
                }
                try (Tensor tp = OpCheck.put(be, DType.F32, p, nel); Tensor tg = OpCheck.put(be, gd, g, nel);
                     Tensor tm = OpCheck.put(be, DType.F32, m, nel); Tensor tv = OpCheck.put(be, DType.F32, v, nel);
                     Tensor tp2 = OpCheck.put(be, DType.F32, p, nel); Tensor tbuf = OpCheck.put(be, DType.F32, m, nel)) {
                    be.adamW(tp, tg, tm, tv, step);
                    c.assertClose("adamW param (grad " + gd + ")", refP, be, tp, 1e-6, 1e-5);
                    c.assertClose("adamW m", refM, be, tm, 1e-7, 1e-5);
                    c.assertClose("adamW v", refV, be, tv, 1e-9, 1e-5);
                    be.sgdMomentum(tp2, tg, tbuf, 0.05f, 0.9f, 0.01f, 0.5f);
                    c.assertClose("sgd param (grad " + gd + ")", refP2, be, tp2, 1e-6, 1e-5);
                    c.assertClose("sgd buffer", refBuf, be, tbuf, 1e-6, 1e-5);
                }
            }
        });
    }

    @Test
    void sumsAndNonFiniteCheck() {
        int nel = 200_003;
        onEach(be -> {
            for (DType d : FLOATS) {
                double[] x = c.values(d, nel, 2);
                double sum = 0, sq = 0;
                for (double xi : x) {
                    sum += xi;
                    sq += xi * xi;
                }
                try (Tensor t = OpCheck.put(be, d, x, nel)) {
                    // fp64 accumulation: only the order of additions differs from the reference
                    assertEquals(sq, be.sumOfSquares(t), 1e-9 * sq, "sumOfSquares " + d + " seed " + c.seed);
                    assertEquals(sum, be.sum(t), 1e-9 * sq, "sum " + d + " seed " + c.seed);
                    try (Tensor acc = be.allocate(DType.F32, MemoryCategory.WORKSPACE, 1)) {
                        // on the device: acc += 0.5·Σx, then += 2·Σx², each rounded once to fp32
                        float start = 3.25f;
                        be.copyFromHost(new float[] {start}, 0, acc);
                        be.sumInto(t, 0.5f, acc);
                        float afterSum = (float) (start + 0.5 * sum);
                        assertEquals(afterSum, be.toHost(acc)[0], 1e-9 * sq + Math.ulp(afterSum),
                                "sumInto " + d + " seed " + c.seed);
                        be.sumOfSquaresInto(t, 2f, acc);
                        float afterSq = (float) (afterSum + 2 * sq);
                        assertEquals(afterSq, be.toHost(acc)[0], 2e-9 * sq + Math.ulp(afterSq),
                                "sumOfSquaresInto " + d + " seed " + c.seed);
                    }
                    assertFalse(be.hasNonFinite(t), "finite data reported non-finite, " + d);
                    float[] bad = {Float.POSITIVE_INFINITY};
                    be.copyFromHost(bad, 0, t.view(nel - 2, 1));
                    assertTrue(be.hasNonFinite(t), "inf not found, " + d);
                    bad[0] = Float.NaN;
                    be.copyFromHost(bad, 0, t.view(nel - 2, 1));
                    assertTrue(be.hasNonFinite(t), "NaN not found, " + d);
                }
            }
        });
    }
}
