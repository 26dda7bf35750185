// A cuBLAS handle bound to one stream, with its own workspace (so concurrent GEMMs on
// different streams never share scratch). One per stream that runs GEMMs. Its math mode forbids
// reductions in the output type: by default cuBLAS may add a split-K GEMM's partial sums in a
// bf16/fp16 output's own precision, rounding several times where the contract (CublasGemm: half
// operands accumulate in fp32) and the CPU reference round once: the likeliest cause of the bf16
// GPT parity failure on an H200, where 3286 of 4096 logits were off by about a bf16 ulp.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cublas.CUBLAS_DEFAULT_MATH;
import static org.bytedeco.cuda.global.cublas.CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
import static org.bytedeco.cuda.global.cublas.cublasCreate_v2;
import static org.bytedeco.cuda.global.cublas.cublasDestroy_v2;
import static org.bytedeco.cuda.global.cublas.cublasSetMathMode;
import static org.bytedeco.cuda.global.cublas.cublasSetStream_v2;
import static org.bytedeco.cuda.global.cublas.cublasSetWorkspace_v2;

import org.bytedeco.cuda.cublas.cublasContext;
import org.fsdp4j.api.Tensor;

final class CublasHandle implements AutoCloseable {

    private final cublasContext handle = new cublasContext();
    private final Tensor workspace;
    private final int device;
    private boolean closed;

    /** Takes ownership of {@code workspace} (device memory allocated on {@code stream}). */
    CublasHandle(CudaStream stream, Tensor workspace, int device) {
        this.workspace = workspace;
        this.device = device;
        CublasCheck.check(cublasCreate_v2(handle), "cublasCreate", device);
        CublasCheck.check(cublasSetStream_v2(handle, stream.handle()), "cublasSetStream(" + stream.name() + ")", device);
        CublasCheck.check(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
                "cublasSetMathMode", device);
        CublasCheck.check(cublasSetWorkspace_v2(handle, new DevicePointer(DeviceTensors.address(workspace)),
                workspace.numBytes()), "cublasSetWorkspace", device);
    }

    cublasContext handle() {
        if (closed) {
            throw new IllegalStateException("cuBLAS handle on cuda:" + device + " is closed");
        }
        return handle;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            CublasCheck.check(cublasDestroy_v2(handle), "cublasDestroy", device);
            workspace.close();
        }
    }
}
