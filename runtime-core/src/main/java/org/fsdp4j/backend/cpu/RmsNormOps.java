// RMSNorm over the last dim (Zhang & Sennrich 2019; Llama's), forward and backward, in
// LayerNormOps' form: the row statistic is computed in fp64, rstd is saved in fp32 for the
// backward, and the weight's gradient is a deterministic column sum (ColumnSums).
package org.fsdp4j.backend.cpu;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;

final class RmsNormOps {

    private RmsNormOps() {
    }

    /** out (N, C) = inp · rstd · weight, rstd (N) = 1 / √(mean(inp²) + eps). */
    static void forward(CpuThreads threads, Tensor inp, Tensor weight, Tensor out, Tensor rstd, float eps) {
        int c = Shapes.rmsNorm("rmsNormForward", inp, weight, out, rstd, eps);
        long rows = Shapes.rows(inp);
        float[] w = Elements.of(weight).loadAll();
        Elements ei = Elements.of(inp);
        Elements eo = Elements.of(out);
        Elements er = Elements.of(rstd);
        threads.forChunks(rows, CpuThreads.rowsPerChunk(c, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            int n = (int) (to - from);
            float[] x = Scratch.floats(0, c);
            float[] rstds = Scratch.floats(1, n);
            for (long r = from; r < to; r++) {
                ei.load(r * c, x, 0, c);
                double ss = 0;
                for (int j = 0; j < c; j++) {
                    ss += (double) x[j] * x[j];
                }
                double s = 1.0 / Math.sqrt(ss / c + eps);
                for (int j = 0; j < c; j++) {
                    x[j] = (float) (x[j] * s * w[j]);
                }
                eo.store(x, 0, r * c, c);
                rstds[(int) (r - from)] = (float) s;
            }
            er.store(rstds, 0, from, n);
        });
    }

    /**
     * dinp (N, C) += rstd · (w·dout − norm · mean_c(w·dout·norm)) with norm = inp · rstd;
     * dweight (C) += Σ_rows dout · norm.
     */
    static void backward(CpuThreads threads, Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp,
                         Tensor dweight) {
        int c = Shapes.rmsNormBackward(dout, inp, weight, rstd, dinp, dweight);
        long rows = Shapes.rows(inp);
        float[] w = Elements.of(weight).loadAll();
        Elements eg = Elements.of(dout);
        Elements ei = Elements.of(inp);
        Elements ed = Elements.of(dinp);
        Elements er = Elements.of(rstd);
        ColumnSums dw = new ColumnSums(rows, c);
        threads.forChunks(rows, dw.rowsPerChunk, (chunk, from, to) -> {
            int n = (int) (to - from);
            float[] g = Scratch.floats(0, c);
            float[] x = Scratch.floats(1, c);
            float[] d = Scratch.floats(2, c);
            float[] rstds = Scratch.floats(3, n);
            er.load(from, rstds, 0, n);
            double[] dwAcc = dw.partial(chunk);
            for (long r = from; r < to; r++) {
                double s = rstds[(int) (r - from)];
                eg.load(r * c, g, 0, c);
                ei.load(r * c, x, 0, c);
                ed.load(r * c, d, 0, c);
                double dnormNormMean = 0;
                for (int j = 0; j < c; j++) {
                    double norm = x[j] * s;
                    dnormNormMean += (double) w[j] * g[j] * norm;
                    dwAcc[j] += norm * g[j];
                }
                dnormNormMean /= c;
                for (int j = 0; j < c; j++) {
                    double norm = x[j] * s;
                    d[j] = (float) (d[j] + ((double) w[j] * g[j] - norm * dnormNormMean) * s);
                }
                ed.store(d, 0, r * c, c);
            }
        });
        dw.addTo(dweight);
    }
}
