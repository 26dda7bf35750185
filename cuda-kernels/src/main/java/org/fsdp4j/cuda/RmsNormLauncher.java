// Launcher for rmsnorm.cu: warp-per-row forward and dinp, column sums for dweight.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class RmsNormLauncher {

    private final Kernel forward;
    private final Kernel backwardDinp;
    private final Kernel backwardWeight;

    RmsNormLauncher(KernelSource m) {
        forward = m.kernel("rmsnorm_forward_kernel");
        backwardDinp = m.kernel("rmsnorm_backward_dinp_kernel");
        backwardWeight = m.kernel("rmsnorm_backward_weight_kernel");
    }

    /** inp, out (N, C); weight (C); rstd (N) F32. */
    void forward(CudaStream s, Tensor inp, Tensor weight, Tensor out, Tensor rstd, long rows, int cols, float eps) {
        forward.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(inp), code(inp), address(weight), code(weight),
                address(out), code(out), address(rstd), rows, cols, eps);
    }

    void backward(CudaStream s, Tensor dout, Tensor inp, Tensor weight, Tensor rstd, Tensor dinp, Tensor dweight,
                  long rows, int cols) {
        backwardDinp.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(dout), code(dout), address(inp), code(inp),
                address(weight), code(weight), address(rstd), address(dinp), code(dinp), rows, cols);
        backwardWeight.launch2d(s, Grid.ceilDiv(cols, ElementwiseLauncher.COLSUM_TX), 1, ElementwiseLauncher.COLSUM_TX,
                ElementwiseLauncher.COLSUM_TY, 0, address(dout), code(dout), address(inp), code(inp), address(rstd),
                address(dweight), code(dweight), rows, cols);
    }
}
