// Launcher for rmsnorm.cu: warp-per-row forward and dinp, column sums for dweight (ColumnSums).
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class RmsNormLauncher {

    private final Kernel forward;
    private final Kernel backwardDinp;
    private final Kernel backwardWeight;
    private final Kernel columnPartials;

    RmsNormLauncher(KernelSource m) {
        forward = m.kernel("rmsnorm_forward_kernel");
        backwardDinp = m.kernel("rmsnorm_backward_dinp_kernel");
        backwardWeight = m.kernel("rmsnorm_backward_weight_kernel");
        columnPartials = m.kernel("column_partials_kernel");
    }

    /** inp, out (N, C); weight (C); rstd (N) F32. */
    void forward(CudaStream s, Tensor inp, Tensor weight, Tensor out, Tensor rstd, long rows, int cols, float eps) {
        forward.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(inp), code(inp), address(weight), code(weight),
                address(out), code(out), address(rstd), rows, cols, eps);
    }

    /** dinp += ..., dweight += its column sums, spread as {@code plan} says (ColumnSums, k = 1). */
    void backward(CudaStream s, Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp, Tensor dweight,
                  long rows, int cols, ColumnSums.Plan plan) {
        backwardDinp.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(dout), code(dout), address(inp), code(inp),
                address(weight), code(weight), address(rstd), address(dinp), code(dinp), rows, cols);
        backwardWeight.launch2d(s, Grid.ceilDiv(cols, ColumnSums.TX), plan.chunks(), ColumnSums.TX, ColumnSums.TY, 0,
                address(dout), code(dout), address(inp), code(inp), address(rstd), address(dweight), code(dweight), rows,
                cols, plan.partialsAddress(), plan.rowsPerChunk());
        ColumnSums.finish(columnPartials, s, plan, cols, dweight, null);
    }
}
