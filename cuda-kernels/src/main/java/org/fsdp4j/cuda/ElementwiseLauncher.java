// Launcher for elementwise.cu: fill, add, bias add and bias backward.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class ElementwiseLauncher {

    private final Kernel fill;
    private final Kernel add;
    private final Kernel addBias;
    private final Kernel setBias;
    private final Kernel biasBackward;
    private final Kernel columnPartials;

    ElementwiseLauncher(KernelSource m) {
        fill = m.kernel("fill_kernel");
        add = m.kernel("add_kernel");
        addBias = m.kernel("add_bias_kernel");
        setBias = m.kernel("set_bias_kernel");
        biasBackward = m.kernel("bias_backward_kernel");
        columnPartials = m.kernel("column_partials_kernel");
    }

    void fill(CudaStream s, Tensor t, float value) {
        long n = t.numel();
        fill.launchStrided(s, n, address(t), code(t), n, value);
    }

    void add(CudaStream s, Tensor a, Tensor b, Tensor out) {
        long n = out.numel();
        add.launchStrided(s, n, address(a), code(a), address(b), code(b), address(out),
                code(out), n);
    }

    /** out (rows, cols) += bias (cols). */
    /** out (rows, cols) += bias (cols), row by row (common.cuh, FOR_ROWS). */
    void addBias(CudaStream s, Tensor out, Tensor bias, long rows, int cols) {
        addBias.launch2d(s, Grid.rowColumns(cols), Grid.rows(rows), Grid.THREADS, 1, 0, address(out), code(out),
                address(bias), code(bias), rows, cols);
    }

    /** out (rows, cols) = bias (cols) in every row, in one pass. */
    void setBias(CudaStream s, Tensor out, Tensor bias, long rows, int cols) {
        setBias.launch2d(s, Grid.rowColumns(cols), Grid.rows(rows), Grid.THREADS, 1, 0, address(out), code(out),
                address(bias), code(bias), rows, cols);
    }

    /** dbias (cols) += column sums of dout (rows, cols), spread as {@code plan} says (ColumnSums, k = 1). */
    void biasBackward(CudaStream s, Tensor dout, Tensor dbias, long rows, int cols, ColumnSums.Plan plan) {
        biasBackward.launch2d(s, Grid.ceilDiv(cols, ColumnSums.TX), plan.chunks(), ColumnSums.TX, ColumnSums.TY, 0, address(dout),
                code(dout), address(dbias), code(dbias), rows, cols, plan.partialsAddress(), plan.rowsPerChunk());
        ColumnSums.finish(columnPartials, s, plan, cols, dbias, null);
    }
}
