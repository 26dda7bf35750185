// Launcher for reductions.cu. Sums run in two fixed-shape passes (per-block fp64 partials,
// then one block over them), so the result depends only on the data and its length.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class ReductionLauncher {

    /** Partials per sum: fills an H200 (132 SMs) twice over; also the partials buffer's length. */
    static final int SUM_BLOCKS = 264;
    private static final int FINAL_THREADS = 256;

    private final Kernel scale;
    private final Kernel partialSum;
    private final Kernel finalSum;
    private final Kernel finalSumInto;
    private final Kernel nonFinite;

    ReductionLauncher(KernelSource m) {
        scale = m.kernel("scale_kernel");
        partialSum = m.kernel("partial_sum_kernel");
        finalSum = m.kernel("final_sum_kernel");
        finalSumInto = m.kernel("final_sum_into_kernel");
        nonFinite = m.kernel("nonfinite_kernel");
    }

    void scale(CudaStream s, Tensor t, float alpha) {
        long n = t.numel();
        scale.launchStrided(s, n, address(t), code(t), n, alpha);
    }

    /**
     * result[0] (F64 as 2 floats' worth of bytes) = Σ x or Σ x²; partials holds SUM_BLOCKS doubles.
     * Both scratch tensors are addressed raw, whatever their dtype.
     */
    void sum(CudaStream s, Tensor x, boolean squared, Tensor partials, Tensor result) {
        long n = x.numel();
        int blocks = (int) Math.max(1, Math.min(SUM_BLOCKS, Grid.ceilDiv(n, Grid.THREADS)));
        partialSum.launch(s, blocks, Grid.THREADS, address(x), code(x), n, squared ? 1 : 0, address(partials));
        finalSum.launch(s, 1, FINAL_THREADS, address(partials), blocks, address(result));
    }

    /** out[0] (F32) += scale · (Σ x or Σ x²), on the device; partials holds SUM_BLOCKS doubles. */
    void sumInto(CudaStream s, Tensor x, boolean squared, Tensor partials, float scale, Tensor out) {
        long n = x.numel();
        int blocks = (int) Math.max(1, Math.min(SUM_BLOCKS, Grid.ceilDiv(n, Grid.THREADS)));
        partialSum.launch(s, blocks, Grid.THREADS, address(x), code(x), n, squared ? 1 : 0, address(partials));
        finalSumInto.launch(s, 1, FINAL_THREADS, address(partials), blocks, scale, address(out));
    }

    /** flag[0] (I32) = 1 if any element is inf or NaN; flag must be zeroed first. */
    void nonFinite(CudaStream s, Tensor x, Tensor flag) {
        long n = x.numel();
        nonFinite.launchStrided(s, n, address(x), code(x), n, address(flag));
    }
}
