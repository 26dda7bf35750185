// LayerNorm over the last dim (eps 1e-5), forward and backward, as llm.c's layernorm: the
// row statistics are computed in fp64, mean and rstd are saved in fp32 for the backward.
// Vectorised (Simd) in fp64 lanes: the per-element math gives the scalar bits; the row sums are
// DL lane partials added in lane order (Simd's note on reductions).
package org.fsdp4j.backend.cpu;

import jdk.incubator.vector.DoubleVector;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;

final class LayerNormOps {

    static final double EPS = 1e-5;

    private LayerNormOps() {
    }

    static void forward(CpuThreads threads, Tensor inp, Tensor weight, Tensor bias, Tensor out,
                        Tensor mean, Tensor rstd) {
        int c = Shapes.layerNorm("layerNormForward", inp, weight, bias, out, mean, rstd);
        long rows = Shapes.rows(inp);
        float[] w = Elements.of(weight).loadAll(Simd.FL);
        float[] b = Elements.of(bias).loadAll(Simd.FL);
        Elements ei = Elements.of(inp);
        Elements eo = Elements.of(out);
        Elements em = Elements.of(mean);
        Elements er = Elements.of(rstd);
        threads.forChunks(rows, CpuThreads.rowsPerChunk(c, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            int n = (int) (to - from);
            float[] x = Scratch.floats(0, c);
            float[] means = Scratch.floats(1, n);
            float[] rstds = Scratch.floats(2, n);
            double[] lanes = Simd.laneScratch();
            for (long r = from; r < to; r++) {
                ei.load(r * c, x, 0, c);
                double m = Simd.sum(x, c, lanes) / c;
                double s = 1.0 / Math.sqrt(squaredDeviations(x, c, m, lanes) / c + EPS);
                normalize(x, w, b, c, m, s);
                eo.store(x, 0, r * c, c);
                means[(int) (r - from)] = (float) m;
                rstds[(int) (r - from)] = (float) s;
            }
            em.store(means, 0, from, n);
            er.store(rstds, 0, from, n);
        });
    }

    static void backward(CpuThreads threads, Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                         Tensor dinp, Tensor dweight, Tensor dbias) {
        int c = Shapes.layerNormBackward(dout, inp, weight, mean, rstd, dinp, dweight, dbias);
        long rows = Shapes.rows(inp);
        float[] w = Elements.of(weight).loadAll(Simd.FL);
        Elements eg = Elements.of(dout);
        Elements ei = Elements.of(inp);
        Elements ed = Elements.of(dinp);
        Elements em = Elements.of(mean);
        Elements er = Elements.of(rstd);
        ColumnSums dw = new ColumnSums(rows, c);
        ColumnSums db = new ColumnSums(rows, c);
        threads.forChunks(rows, dw.rowsPerChunk, (chunk, from, to) -> {
            int n = (int) (to - from);
            float[] g = Scratch.floats(0, c);
            float[] x = Scratch.floats(1, c);
            float[] d = Scratch.floats(2, c);
            float[] means = Scratch.floats(3, n);
            float[] rstds = Scratch.floats(4, n);
            em.load(from, means, 0, n);
            er.load(from, rstds, 0, n);
            double[] dwAcc = dw.partial(chunk);
            double[] dbAcc = db.partial(chunk);
            double[] lanes = Simd.laneScratch();
            for (long r = from; r < to; r++) {
                double m = means[(int) (r - from)];
                double s = rstds[(int) (r - from)];
                eg.load(r * c, g, 0, c);
                ei.load(r * c, x, 0, c);
                ed.load(r * c, d, 0, c);
                rowSums(x, g, w, c, m, s, lanes);
                columnSums(x, g, c, m, s, dbAcc, dwAcc);
                backwardDx(x, g, w, d, c, m, s, lanes[0] / c, lanes[1] / c);
                ed.store(d, 0, r * c, c);
            }
        });
        dw.addTo(dweight);
        db.addTo(dbias);
    }

    // The row loops are small methods of their own, compiled alone (@CompiledAlone, JitDirectives):
    // C2 inlines a method's vector calls up to a node budget, and a vector op beyond it runs boxed
    // (an allocation per op). Vectors never cross these methods' boundaries, only arrays and scalars.

    /** Σ (x[j] − m)² over a row, fp64. */
    @CompiledAlone
    private static double squaredDeviations(float[] x, int c, double m, double[] lanes) {
        int vecEnd = c - c % Simd.DL;
        DoubleVector acc = DoubleVector.zero(Simd.D);
        int wide = Simd.wideEnd(vecEnd, x.length);
        int j = 0;
        for (; j + Simd.FL <= wide; j += Simd.FL) {        // the two halves in turn: lane order as DL steps
            DoubleVector lo = Simd.widenAt(x, j).sub(m);
            DoubleVector hi = Simd.widenAt(x, j + Simd.DL).sub(m);
            acc = acc.add(lo.mul(lo)).add(hi.mul(hi));
        }
        for (; j < vecEnd; j += Simd.DL) {
            DoubleVector d = Simd.widen(x, j).sub(m);
            acc = acc.add(d.mul(d));
        }
        double var = Simd.sumLanes(acc, lanes);
        for (j = vecEnd; j < c; j++) {
            double d = x[j] - m;
            var += d * d;
        }
        return var;
    }

    /** x = (x − m)·s·w + b, in fp64, rounded once. */
    @CompiledAlone
    private static void normalize(float[] x, float[] w, float[] b, int c, double m, double s) {
        int vecEnd = c - c % Simd.DL;
        int wide = Simd.wideEnd(vecEnd, Math.min(x.length, Math.min(w.length, b.length)));
        int j = 0;
        for (; j + Simd.FL <= wide; j += Simd.FL) {
            int h = j + Simd.DL;
            DoubleVector lo = Simd.widenAt(x, j).sub(m).mul(s).mul(Simd.widenAt(w, j)).add(Simd.widenAt(b, j));
            DoubleVector hi = Simd.widenAt(x, h).sub(m).mul(s).mul(Simd.widenAt(w, h)).add(Simd.widenAt(b, h));
            Simd.narrow(lo, hi).intoArray(x, j);
        }
        for (; j < vecEnd; j += Simd.DL) {
            Simd.narrowInto(Simd.widen(x, j).sub(m).mul(s).mul(Simd.widen(w, j)).add(Simd.widen(b, j)), x, j);
        }
        for (j = vecEnd; j < c; j++) {
            x[j] = (float) ((x[j] - m) * s * w[j] + b[j]);
        }
    }

    /**
     * One row of the backward's sums into sums[0], sums[1]: Σ dnorm and Σ dnorm·norm (dnorm = w·g).
     * (The column sums are columnSums: both loops in one method outgrew what C2 intrinsifies.)
     */
    @CompiledAlone
    private static void rowSums(float[] x, float[] g, float[] w, int c, double m, double s, double[] sums) {
        int vecEnd = c - c % Simd.DL;
        DoubleVector meanAcc = DoubleVector.zero(Simd.D);
        DoubleVector normMeanAcc = DoubleVector.zero(Simd.D);
        int wide = Simd.wideEnd(vecEnd, Math.min(x.length, Math.min(g.length, w.length)));
        int j = 0;
        for (; j + Simd.FL <= wide; j += Simd.FL) {        // the two halves in turn: lane order as DL steps
            int h = j + Simd.DL;
            DoubleVector normLo = Simd.widenAt(x, j).sub(m).mul(s);
            DoubleVector dnormLo = Simd.widenAt(w, j).mul(Simd.widenAt(g, j));
            DoubleVector normHi = Simd.widenAt(x, h).sub(m).mul(s);
            DoubleVector dnormHi = Simd.widenAt(w, h).mul(Simd.widenAt(g, h));
            meanAcc = meanAcc.add(dnormLo).add(dnormHi);
            normMeanAcc = normMeanAcc.add(dnormLo.mul(normLo)).add(dnormHi.mul(normHi));
        }
        for (; j < vecEnd; j += Simd.DL) {
            DoubleVector norm = Simd.widen(x, j).sub(m).mul(s);
            DoubleVector dnorm = Simd.widen(w, j).mul(Simd.widen(g, j));
            meanAcc = meanAcc.add(dnorm);
            normMeanAcc = normMeanAcc.add(dnorm.mul(norm));
        }
        double dnormMean = Simd.sumLanes(meanAcc, sums);
        double dnormNormMean = Simd.sumLanes(normMeanAcc, sums);
        for (j = vecEnd; j < c; j++) {
            double norm = (x[j] - m) * s;
            double dnorm = (double) w[j] * g[j];
            dnormMean += dnorm;
            dnormNormMean += dnorm * norm;
        }
        sums[0] = dnormMean;
        sums[1] = dnormNormMean;
    }

    /** One row's share of the column sums: dbias += g, dweight += norm·g, in fp64. */
    @CompiledAlone
    private static void columnSums(float[] x, float[] g, int c, double m, double s, double[] dbAcc, double[] dwAcc) {
        int vecEnd = c - c % Simd.DL;
        int j = 0;
        for (; j < vecEnd; j += Simd.DL) {              // one D vector of each sum per step
            DoubleVector gv = Simd.widen(g, j);
            DoubleVector.fromArray(Simd.D, dbAcc, j).add(gv).intoArray(dbAcc, j);
            DoubleVector.fromArray(Simd.D, dwAcc, j).add(Simd.widen(x, j).sub(m).mul(s).mul(gv)).intoArray(dwAcc, j);
        }
        for (j = vecEnd; j < c; j++) {
            double norm = (x[j] - m) * s;
            dbAcc[j] += g[j];
            dwAcc[j] += norm * g[j];
        }
    }

    /** d += (dnorm − mean(dnorm) − norm·mean(dnorm·norm))·s, in fp64, rounded once. */
    @CompiledAlone
    private static void backwardDx(float[] x, float[] g, float[] w, float[] d, int c, double m, double s,
                                   double dnormMean, double dnormNormMean) {
        int vecEnd = c - c % Simd.DL;
        int wide = Simd.wideEnd(vecEnd, Math.min(Math.min(x.length, g.length), Math.min(w.length, d.length)));
        int j = 0;
        for (; j + Simd.FL <= wide; j += Simd.FL) {
            int h = j + Simd.DL;
            DoubleVector normLo = Simd.widenAt(x, j).sub(m).mul(s);
            DoubleVector dnormLo = Simd.widenAt(w, j).mul(Simd.widenAt(g, j));
            DoubleVector lo = Simd.widenAt(d, j).add(dnormLo.sub(dnormMean).sub(normLo.mul(dnormNormMean)).mul(s));
            DoubleVector normHi = Simd.widenAt(x, h).sub(m).mul(s);
            DoubleVector dnormHi = Simd.widenAt(w, h).mul(Simd.widenAt(g, h));
            DoubleVector hi = Simd.widenAt(d, h).add(dnormHi.sub(dnormMean).sub(normHi.mul(dnormNormMean)).mul(s));
            Simd.narrow(lo, hi).intoArray(d, j);
        }
        for (; j < vecEnd; j += Simd.DL) {
            DoubleVector norm = Simd.widen(x, j).sub(m).mul(s);
            DoubleVector dnorm = Simd.widen(w, j).mul(Simd.widen(g, j));
            Simd.narrowInto(Simd.widen(d, j).add(dnorm.sub(dnormMean).sub(norm.mul(dnormNormMean)).mul(s)), d, j);
        }
        for (j = vecEnd; j < c; j++) {
            double norm = (x[j] - m) * s;
            double dnorm = (double) w[j] * g[j];
            d[j] = (float) (d[j] + (dnorm - dnormMean - norm * dnormNormMean) * s);
        }
    }
}
