// Emulator cases for layernorm.cu through LayerNormLauncher: forward (output, mean, rstd) and
// backward (dinp accumulated, dweight and dbias as column sums), for row lengths below, across
// and far above a warp's 32 lanes (C = 1 makes the variance 0, so rstd = 1/√eps), more rows than
// one block's 8 warps, rows with a large common offset (the variance's cancellation), and mixed
// dtypes. References follow the kernel's order of fp32 operations (Approx); eps is the CPU twin's
// 1e-5, the kernel's 1e-5f counting as one rounding.
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class LayerNormCases {

    private static final Approx EPS = new Approx(1e-5, 1e-5 * Approx.U);
    /** Per row a lane sums ⌈C/32⌉ elements in order, then a 5-level butterfly. */
    private static final int LANES = 32;

    private LayerNormCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(forward(r, DType.F32, DType.F32, DType.F32, 37, 45, 0));
        out.add(forward(r, DType.BF16, DType.F32, DType.BF16, 100, 300, 4));
        out.add(forward(r, DType.F16, DType.F16, DType.F32, 9, 1, 0));
        out.add(forward(r, DType.F32, DType.BF16, DType.F16, 20, 32, 100));
        out.add(backward(r, DType.F32, DType.F32, 37, 45, 1));
        out.add(backward(r, DType.BF16, DType.F32, 100, 300, 1));
        out.add(backward(r, DType.F16, DType.F16, 9, 1, 1));
        out.add(backward(r, DType.BF16, DType.BF16, 20, 33, 1));
        out.add(backward(r, DType.F32, DType.F32, 37, 45, 4));     // row chunks (ColumnSums)
        out.add(backward(r, DType.BF16, DType.BF16, 100, 33, 3));
        return out;
    }

    private static long laneDepth(int cols) {
        return (cols + LANES - 1) / LANES + 5;
    }

    /** inp (N, C) = offset + U(−3, 3); weight U(0.5, 1.5), bias U(−1, 1). */
    private static EmuCase forward(Random r, DType xd, DType wd, DType od, int rows, int cols, double offset) {
        EmuCase c = new EmuCase("layernorm_forward_kernel", xd + "," + wd + "->" + od + " " + rows + "x" + cols
                + (offset != 0 ? " offset " + offset : ""));
        Tensor inp = c.device.allocate(xd, rows, cols);
        Tensor w = c.device.allocate(wd, cols);
        Tensor b = c.device.allocate(wd, cols);
        Tensor out = c.device.allocate(od, rows, cols);
        Tensor mean = c.device.allocate(DType.F32, rows);
        Tensor rstd = c.device.allocate(DType.F32, rows);
        double[] raw = EmuData.uniform(r, rows * cols, 3);
        for (int i = 0; i < raw.length; i++) {
            raw[i] += offset;
        }
        double[] x = c.device.put(inp, raw);
        double[] wv = c.device.put(w, EmuData.uniform(r, cols, 0.5, 1.5));
        double[] bv = c.device.put(b, EmuData.uniform(r, cols, 1));
        new LayerNormLauncher(c.device).forward(null, inp, w, b, out, mean, rstd, rows, cols);

        Approx[] refOut = new Approx[rows * cols];
        Approx[] refMean = new Approx[rows];
        Approx[] refRstd = new Approx[rows];
        long depth = laneDepth(cols);
        for (int row = 0; row < rows; row++) {
            List<Approx> xs = new ArrayList<>();
            for (int j = 0; j < cols; j++) {
                xs.add(Approx.exact(x[row * cols + j]));
            }
            Approx m = Approx.sum(xs, depth).div(Approx.exact(cols));
            List<Approx> squares = new ArrayList<>();
            for (Approx xj : xs) {
                Approx d = xj.minus(m);
                squares.add(d.times(d));
            }
            Approx var = Approx.sum(squares, depth).div(Approx.exact(cols));
            Approx rs = Approx.exact(1).div(var.plus(EPS).sqrt());
            for (int j = 0; j < cols; j++) {
                refOut[row * cols + j] = xs.get(j).minus(m).times(rs).times(Approx.exact(wv[j]))
                        .plus(Approx.exact(bv[j]));
            }
            refMean[row] = m;
            refRstd[row] = rs;
        }
        c.expect("out", out, refOut);
        c.expect("mean", mean, refMean);
        c.expect("rstd", rstd, refRstd);
        return c;
    }

    private static EmuCase backward(Random r, DType xd, DType wd, int rows, int cols, int chunks) {
        EmuCase c = new EmuCase(ColumnSumCases.subjects(List.of("layernorm_backward_dinp_kernel",
                "layernorm_backward_params_kernel"), chunks), xd + "," + wd + " " + rows + "x" + cols
                + ColumnSumCases.label(chunks));
        Tensor dout = c.device.allocate(xd, rows, cols);
        Tensor inp = c.device.allocate(xd, rows, cols);
        Tensor w = c.device.allocate(wd, cols);
        Tensor mean = c.device.allocate(DType.F32, rows);
        Tensor rstd = c.device.allocate(DType.F32, rows);
        Tensor dinp = c.device.allocate(xd, rows, cols);
        Tensor dw = c.device.allocate(wd, cols);
        Tensor db = c.device.allocate(wd, cols);
        double[] g = c.device.put(dout, EmuData.uniform(r, rows * cols, 1));
        double[] x = c.device.put(inp, EmuData.uniform(r, rows * cols, 3));
        double[] wv = c.device.put(w, EmuData.uniform(r, cols, 0.5, 1.5));
        double[] d0 = c.device.put(dinp, EmuData.uniform(r, rows * cols, 1));
        double[] dw0 = c.device.put(dw, EmuData.uniform(r, cols, 1));
        double[] db0 = c.device.put(db, EmuData.uniform(r, cols, 1));
        // the statistics as the forward stores them: fp32 of the row's mean and 1/√(var + eps)
        double[] mv = new double[rows];
        double[] rv = new double[rows];
        for (int row = 0; row < rows; row++) {
            double s = 0;
            double ss = 0;
            for (int j = 0; j < cols; j++) {
                s += x[row * cols + j];
            }
            mv[row] = s / cols;
            for (int j = 0; j < cols; j++) {
                ss += (x[row * cols + j] - mv[row]) * (x[row * cols + j] - mv[row]);
            }
            rv[row] = 1 / Math.sqrt(ss / cols + 1e-5);
        }
        mv = c.device.put(mean, mv);
        rv = c.device.put(rstd, rv);
        new LayerNormLauncher(c.device).backward(null, dout, inp, w, mean, rstd, dinp, dw, db, rows, cols,
                ColumnSumCases.plan(c, rows, cols, 2, chunks));

        Approx[] refDinp = new Approx[rows * cols];
        long depth = laneDepth(cols);
        for (int row = 0; row < rows; row++) {
            Approx m = Approx.exact(mv[row]);
            Approx rs = Approx.exact(rv[row]);
            List<Approx> gs = new ArrayList<>();
            List<Approx> ns = new ArrayList<>();
            List<Approx> gns = new ArrayList<>();
            for (int j = 0; j < cols; j++) {
                Approx gj = Approx.exact(wv[j]).times(Approx.exact(g[row * cols + j]));
                Approx nj = Approx.exact(x[row * cols + j]).minus(m).times(rs);
                gs.add(gj);
                ns.add(nj);
                gns.add(gj.times(nj));
            }
            Approx meanG = Approx.sum(gs, depth).div(Approx.exact(cols));
            Approx meanGN = Approx.sum(gns, depth).div(Approx.exact(cols));
            for (int j = 0; j < cols; j++) {
                refDinp[row * cols + j] = Approx.exact(d0[row * cols + j])
                        .plus(gs.get(j).minus(meanG).minus(ns.get(j).times(meanGN)).times(rs));
            }
        }
        long colDepth = ColumnSumCases.depth(rows, chunks);
        Approx[] refDw = new Approx[cols];
        Approx[] refDb = new Approx[cols];
        for (int j = 0; j < cols; j++) {
            List<Approx> dws = new ArrayList<>(List.of(Approx.exact(dw0[j])));
            List<Approx> dbs = new ArrayList<>(List.of(Approx.exact(db0[j])));
            for (int row = 0; row < rows; row++) {
                Approx d = Approx.exact(g[row * cols + j]);
                dws.add(d.times(Approx.exact(x[row * cols + j]).minus(Approx.exact(mv[row]))).times(Approx.exact(rv[row])));
                dbs.add(d);
            }
            refDw[j] = Approx.sum(dws, colDepth);
            refDb[j] = Approx.sum(dbs, colDepth);
        }
        c.expect("dinp", dinp, refDinp);
        c.expect("dweight", dw, refDw);
        c.expect("dbias", db, refDb);
        return c;
    }
}
