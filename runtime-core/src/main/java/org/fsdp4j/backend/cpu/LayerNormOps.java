// LayerNorm over the last dim (eps 1e-5), forward and backward, as llm.c's layernorm: the
// row statistics are computed in fp64, mean and rstd are saved in fp32 for the backward.
package org.fsdp4j.backend.cpu;

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
        float[] w = Elements.of(weight).loadAll();
        float[] b = Elements.of(bias).loadAll();
        Elements ei = Elements.of(inp);
        Elements eo = Elements.of(out);
        Elements em = Elements.of(mean);
        Elements er = Elements.of(rstd);
        threads.forChunks(rows, CpuThreads.rowsPerChunk(c, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            int n = (int) (to - from);
            float[] x = Scratch.floats(0, c);
            float[] means = Scratch.floats(1, n);
            float[] rstds = Scratch.floats(2, n);
            for (long r = from; r < to; r++) {
                ei.load(r * c, x, 0, c);
                double sum = 0;
                for (int j = 0; j < c; j++) {
                    sum += x[j];
                }
                double m = sum / c;
                double var = 0;
                for (int j = 0; j < c; j++) {
                    double d = x[j] - m;
                    var += d * d;
                }
                double s = 1.0 / Math.sqrt(var / c + EPS);
                for (int j = 0; j < c; j++) {
                    x[j] = (float) ((x[j] - m) * s * w[j] + b[j]);
                }
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
        float[] w = Elements.of(weight).loadAll();
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
            for (long r = from; r < to; r++) {
                double m = means[(int) (r - from)];
                double s = rstds[(int) (r - from)];
                eg.load(r * c, g, 0, c);
                ei.load(r * c, x, 0, c);
                ed.load(r * c, d, 0, c);
                double dnormMean = 0;
                double dnormNormMean = 0;
                for (int j = 0; j < c; j++) {
                    double norm = (x[j] - m) * s;
                    double dnorm = (double) w[j] * g[j];
                    dnormMean += dnorm;
                    dnormNormMean += dnorm * norm;
                    dbAcc[j] += g[j];
                    dwAcc[j] += norm * g[j];
                }
                dnormMean /= c;
                dnormNormMean /= c;
                for (int j = 0; j < c; j++) {
                    double norm = (x[j] - m) * s;
                    double dnorm = (double) w[j] * g[j];
                    d[j] = (float) (d[j] + (dnorm - dnormMean - norm * dnormNormMean) * s);
                }
                ed.store(d, 0, r * c, c);
            }
        });
        dw.addTo(dweight);
        db.addTo(dbias);
    }
}
