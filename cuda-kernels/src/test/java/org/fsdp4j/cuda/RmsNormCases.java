// Emulator cases for rmsnorm.cu through RmsNormLauncher: forward (output and rstd) and backward
// (dinp accumulated, dweight as column sums), for row lengths below, across and far above a warp's
// 32 lanes (C = 1: rstd = 1/√(x² + eps)), more rows than one block's 8 warps, rows of one large
// value (where eps no longer matters) and of zeros (where only eps does: rstd = 1/√eps), two eps
// values, and mixed dtypes. References follow the kernel's order of fp32 operations (Approx); eps
// reaches the kernel as the float the launcher passes, so it is exact.
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class RmsNormCases {

    /** Per row a lane sums ⌈C/32⌉ elements in order, then a 5-level butterfly. */
    private static final int LANES = 32;

    private RmsNormCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(forward(r, DType.F32, DType.F32, DType.F32, 37, 45, 1e-5f, false));
        out.add(forward(r, DType.BF16, DType.F32, DType.BF16, 100, 300, 1e-6f, false));
        out.add(forward(r, DType.F16, DType.F16, DType.F32, 9, 1, 1e-5f, false));
        out.add(forward(r, DType.F32, DType.BF16, DType.F16, 20, 32, 1e-5f, true));
        out.add(backward(r, DType.F32, DType.F32, 37, 45, 1e-5f, 1));
        out.add(backward(r, DType.BF16, DType.F32, 100, 300, 1e-6f, 1));
        out.add(backward(r, DType.F16, DType.F16, 9, 1, 1e-5f, 1));
        out.add(backward(r, DType.BF16, DType.BF16, 20, 33, 1e-5f, 1));
        out.add(backward(r, DType.F32, DType.F32, 37, 45, 1e-5f, 5));   // row chunks (ColumnSums)
        return out;
    }

    private static long laneDepth(int cols) {
        return (cols + LANES - 1) / LANES + 5;
    }

    /** inp (N, C) = U(−3, 3), with row 0 all 1e3 and row 1 all 0 when {@code edges}; weight U(0.5, 1.5). */
    private static EmuCase forward(Random r, DType xd, DType wd, DType od, int rows, int cols, float eps,
                                   boolean edges) {
        EmuCase c = new EmuCase("rmsnorm_forward_kernel", xd + "," + wd + "->" + od + " " + rows + "x" + cols
                + " eps " + eps + (edges ? " large and zero rows" : ""));
        Tensor inp = c.device.allocate(xd, rows, cols);
        Tensor w = c.device.allocate(wd, cols);
        Tensor out = c.device.allocate(od, rows, cols);
        Tensor rstd = c.device.allocate(DType.F32, rows);
        double[] raw = EmuData.uniform(r, rows * cols, 3);
        if (edges) {
            for (int j = 0; j < cols; j++) {
                raw[j] = 1e3;
                raw[cols + j] = 0;
            }
        }
        double[] x = c.device.put(inp, raw);
        double[] wv = c.device.put(w, EmuData.uniform(r, cols, 0.5, 1.5));
        new RmsNormLauncher(c.device).forward(null, inp, w, out, rstd, rows, cols, eps);

        Approx[] refOut = new Approx[rows * cols];
        Approx[] refRstd = new Approx[rows];
        long depth = laneDepth(cols);
        for (int row = 0; row < rows; row++) {
            List<Approx> squares = new ArrayList<>();
            for (int j = 0; j < cols; j++) {
                Approx xj = Approx.exact(x[row * cols + j]);
                squares.add(xj.times(xj));
            }
            Approx ms = Approx.sum(squares, depth).div(Approx.exact(cols));
            Approx rs = Approx.exact(1).div(ms.plus(Approx.exact(eps)).sqrt());
            for (int j = 0; j < cols; j++) {
                refOut[row * cols + j] = Approx.exact(x[row * cols + j]).times(rs).times(Approx.exact(wv[j]));
            }
            refRstd[row] = rs;
        }
        c.expect("out", out, refOut);
        c.expect("rstd", rstd, refRstd);
        return c;
    }

    private static EmuCase backward(Random r, DType xd, DType wd, int rows, int cols, float eps, int chunks) {
        EmuCase c = new EmuCase(ColumnSumCases.subjects(List.of("rmsnorm_backward_dinp_kernel",
                "rmsnorm_backward_weight_kernel"), chunks), xd + "," + wd + " " + rows + "x" + cols
                + ColumnSumCases.label(chunks));
        Tensor dout = c.device.allocate(xd, rows, cols);
        Tensor inp = c.device.allocate(xd, rows, cols);
        Tensor w = c.device.allocate(wd, cols);
        Tensor rstd = c.device.allocate(DType.F32, rows);
        Tensor dinp = c.device.allocate(xd, rows, cols);
        Tensor dw = c.device.allocate(wd, cols);
        double[] g = c.device.put(dout, EmuData.uniform(r, rows * cols, 1));
        double[] x = c.device.put(inp, EmuData.uniform(r, rows * cols, 3));
        double[] wv = c.device.put(w, EmuData.uniform(r, cols, 0.5, 1.5));
        double[] d0 = c.device.put(dinp, EmuData.uniform(r, rows * cols, 1));
        double[] dw0 = c.device.put(dw, EmuData.uniform(r, cols, 1));
        // rstd as the forward stores it: fp32 of 1/√(mean(x²) + eps)
        double[] rv = new double[rows];
        for (int row = 0; row < rows; row++) {
            double ss = 0;
            for (int j = 0; j < cols; j++) {
                ss += x[row * cols + j] * x[row * cols + j];
            }
            rv[row] = 1 / Math.sqrt(ss / cols + eps);
        }
        rv = c.device.put(rstd, rv);
        new RmsNormLauncher(c.device).backward(null, dout, inp, w, rstd, dinp, dw, rows, cols,
                ColumnSumCases.plan(c, rows, cols, 1, chunks));

        Approx[] refDinp = new Approx[rows * cols];
        long depth = laneDepth(cols);
        for (int row = 0; row < rows; row++) {
            Approx rs = Approx.exact(rv[row]);
            List<Approx> gs = new ArrayList<>();
            List<Approx> ns = new ArrayList<>();
            List<Approx> gns = new ArrayList<>();
            for (int j = 0; j < cols; j++) {
                Approx gj = Approx.exact(wv[j]).times(Approx.exact(g[row * cols + j]));
                Approx nj = Approx.exact(x[row * cols + j]).times(rs);
                gs.add(gj);
                ns.add(nj);
                gns.add(gj.times(nj));
            }
            Approx meanGN = Approx.sum(gns, depth).div(Approx.exact(cols));
            for (int j = 0; j < cols; j++) {
                refDinp[row * cols + j] = Approx.exact(d0[row * cols + j])
                        .plus(gs.get(j).minus(ns.get(j).times(meanGN)).times(rs));
            }
        }
        long colDepth = ColumnSumCases.depth(rows, chunks);
        Approx[] refDw = new Approx[cols];
        for (int j = 0; j < cols; j++) {
            List<Approx> dws = new ArrayList<>(List.of(Approx.exact(dw0[j])));
            for (int row = 0; row < rows; row++) {
                dws.add(Approx.exact(g[row * cols + j]).times(Approx.exact(x[row * cols + j]).times(Approx.exact(rv[row]))));
            }
            refDw[j] = Approx.sum(dws, colDepth);
        }
        c.expect("dinp", dinp, refDinp);
        c.expect("dweight", dw, refDw);
        return c;
    }
}
