// Launcher for layernorm.cu: warp-per-row forward and dinp, column sums for dweight/dbias (ColumnSums).
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class LayerNormLauncher {

    private final Kernel forward;
    private final Kernel backwardDinp;
    private final Kernel backwardParams;
    private final Kernel columnPartials;

    LayerNormLauncher(KernelSource m) {
        forward = m.kernel("layernorm_forward_kernel");
        backwardDinp = m.kernel("layernorm_backward_dinp_kernel");
        backwardParams = m.kernel("layernorm_backward_params_kernel");
        columnPartials = m.kernel("column_partials_kernel");
    }

    /** inp, out (N, C); weight, bias (C); mean, rstd (N) F32. */
    void forward(CudaStream s, Tensor inp, Tensor weight, Tensor bias, Tensor out, Tensor mean, Tensor rstd,
                 long rows, int cols) {
        forward.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(inp), code(inp), address(weight), code(weight),
                address(bias), code(bias), address(out), code(out), address(mean), address(rstd), rows, cols);
    }

    /** dinp += ..., dweight and dbias += their column sums, spread as {@code plan} says (ColumnSums, k = 2). */
    void backward(CudaStream s, Tensor dout, Tensor inp, Tensor weight, Tensor mean, Tensor rstd,
                  Tensor dinp, Tensor dweight, Tensor dbias, long rows, int cols, ColumnSums.Plan plan) {
        backwardDinp.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(dout), code(dout), address(inp), code(inp),
                address(weight), code(weight), address(mean), address(rstd), address(dinp), code(dinp), rows, cols);
        backwardParams.launch2d(s, Grid.ceilDiv(cols, ColumnSums.TX), plan.chunks(), ColumnSums.TX, ColumnSums.TY, 0,
                address(dout), code(dout), address(inp), code(inp), address(mean), address(rstd), address(dweight),
                code(dweight), address(dbias), code(dbias), rows, cols, plan.partialsAddress(), plan.rowsPerChunk());
        ColumnSums.finish(columnPartials, s, plan, cols, dweight, dbias);
    }
}
