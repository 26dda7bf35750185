// Emulator cases for elementwise.cu through ElementwiseLauncher: fill (every dtype, fp16
// overflow, NaN, I32's integer part), add (mixed dtypes, out aliasing an input, fp16
// overflow), bias add, and the bias backward's column sums at row counts below, at and far
// above the kernel's 16 row-threads and column counts that are not a multiple of 32.
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class ElementwiseCases {

    private ElementwiseCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(fill(DType.F32, 1000, 3.7f));
        out.add(fill(DType.F32, 1, Float.NaN));
        out.add(fill(DType.BF16, 777, -2.5f));
        out.add(fill(DType.F16, 300, 1e5f));
        out.add(fill(DType.I32, 1000, -3.7f));
        out.add(add(r, DType.F32, DType.F32, DType.F32, 1000, false));
        out.add(add(r, DType.F16, DType.F32, DType.BF16, 777, false));
        out.add(add(r, DType.BF16, DType.BF16, DType.BF16, 1000, true));
        out.add(add(r, DType.F16, DType.F16, DType.F16, 513, true));
        out.add(add(r, DType.F32, DType.BF16, DType.F16, 1, false));
        out.add(addBias(r, DType.F16, DType.F32, 37, 45));
        out.add(addBias(r, DType.BF16, DType.BF16, 3, 1));
        out.add(addBias(r, DType.F32, DType.F16, 64, 33));
        out.add(setBias(r, DType.BF16, DType.BF16, 37, 45));
        out.add(setBias(r, DType.F32, DType.F16, 5, 300));
        out.add(biasBackward(r, DType.F32, DType.F32, 1000, 45, 1));
        out.add(biasBackward(r, DType.BF16, DType.F32, 37, 1, 1));
        out.add(biasBackward(r, DType.F16, DType.F16, 1, 100, 1));
        out.add(biasBackward(r, DType.BF16, DType.BF16, 300, 33, 1));
        out.add(biasBackward(r, DType.F32, DType.F32, 1000, 45, 3));    // row chunks (ColumnSums), the last short
        out.add(biasBackward(r, DType.BF16, DType.BF16, 300, 33, 7));
        return out;
    }

    private static EmuCase fill(DType d, int n, float value) {
        EmuCase c = new EmuCase("fill_kernel", d + " n=" + n + " value=" + value);
        Tensor t = c.device.allocate(d, n);
        new ElementwiseLauncher(c.device).fill(null, t, value);
        double[] want = new double[n];
        Arrays.fill(want, d == DType.I32 ? (int) value : value);
        c.expectExact("t", t, want);
        return c;
    }

    /** out = a + b; with {@code aliased}, out is a itself (fp16 inputs near 6e4 overflow). */
    private static EmuCase add(Random r, DType ad, DType bd, DType od, int n, boolean aliased) {
        EmuCase c = new EmuCase("add_kernel", ad + "+" + bd + "->" + od + " n=" + n + (aliased ? " out=a" : ""));
        Tensor a = c.device.allocate(ad, n);
        Tensor b = c.device.allocate(bd, n);
        Tensor out = aliased ? a : c.device.allocate(od, n);
        double scale = od == DType.F16 ? 4e4 : 10;
        double[] x = c.device.put(a, EmuData.uniform(r, n, scale));
        double[] y = c.device.put(b, EmuData.uniform(r, n, scale));
        new ElementwiseLauncher(c.device).add(null, a, b, out);
        Approx[] ref = new Approx[n];
        for (int i = 0; i < n; i++) {
            ref[i] = Approx.exact(x[i]).plus(Approx.exact(y[i]));
        }
        c.expect("out", out, ref);
        return c;
    }

    /** out = bias in every row, whatever out held: the bias as out's dtype rounds it. */
    private static EmuCase setBias(Random r, DType od, DType bd, int rows, int cols) {
        EmuCase c = new EmuCase("set_bias_kernel", od + "=" + bd + " " + rows + "x" + cols);
        Tensor out = c.device.allocate(od, rows, cols);
        Tensor bias = c.device.allocate(bd, cols);
        c.device.put(out, EmuData.uniform(r, rows * cols, 3));
        double[] b = c.device.put(bias, EmuData.uniform(r, cols, 3));
        new ElementwiseLauncher(c.device).setBias(null, out, bias, rows, cols);
        Approx[] ref = new Approx[rows * cols];
        for (int i = 0; i < ref.length; i++) {
            ref[i] = Approx.exact(b[i % cols]);
        }
        c.expect("out", out, ref);
        return c;
    }

    private static EmuCase addBias(Random r, DType od, DType bd, int rows, int cols) {
        EmuCase c = new EmuCase("add_bias_kernel", od + "+=" + bd + " " + rows + "x" + cols);
        Tensor out = c.device.allocate(od, rows, cols);
        Tensor bias = c.device.allocate(bd, cols);
        double[] o = c.device.put(out, EmuData.uniform(r, rows * cols, 3));
        double[] b = c.device.put(bias, EmuData.uniform(r, cols, 3));
        new ElementwiseLauncher(c.device).addBias(null, out, bias, rows, cols);
        Approx[] ref = new Approx[rows * cols];
        for (int i = 0; i < ref.length; i++) {
            ref[i] = Approx.exact(o[i]).plus(Approx.exact(b[i % cols]));
        }
        c.expect("out", out, ref);
        return c;
    }

    /**
     * dbias[c] += Σ_r dout[r, c]: each of the 16 row-threads of a chunk sums its share of the chunk's
     * rows in order, thread row 0 adds the 16 partials, the chunks' sums are added in order, then
     * dbias: every term passes at most ColumnSumCases.depth(...) additions.
     */
    private static EmuCase biasBackward(Random r, DType dd, DType bd, int rows, int cols, int chunks) {
        EmuCase c = new EmuCase(ColumnSumCases.subjects("bias_backward_kernel", chunks),
                dd + "->" + bd + " " + rows + "x" + cols + ColumnSumCases.label(chunks));
        Tensor dout = c.device.allocate(dd, rows, cols);
        Tensor dbias = c.device.allocate(bd, cols);
        double[] g = c.device.put(dout, EmuData.uniform(r, rows * cols, 2));
        double[] b0 = c.device.put(dbias, EmuData.uniform(r, cols, 2));
        new ElementwiseLauncher(c.device).biasBackward(null, dout, dbias, rows, cols,
                ColumnSumCases.plan(c, rows, cols, 1, chunks));
        long depth = ColumnSumCases.depth(rows, chunks);
        Approx[] ref = new Approx[cols];
        for (int j = 0; j < cols; j++) {
            List<Approx> terms = new ArrayList<>();
            terms.add(Approx.exact(b0[j]));
            for (int i = 0; i < rows; i++) {
                terms.add(Approx.exact(g[i * cols + j]));
            }
            ref[j] = Approx.sum(terms, depth);
        }
        c.expect("dbias", dbias, ref);
        return c;
    }
}
