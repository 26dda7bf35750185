// The checked-call helper for cuBLAS: a failed status becomes a CudaException naming the call.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cublas.CUBLAS_STATUS_SUCCESS;
import static org.bytedeco.cuda.global.cublas.cublasGetStatusName;
import static org.bytedeco.cuda.global.cublas.cublasGetStatusString;

final class CublasCheck {

    private CublasCheck() {
    }

    static void check(int status, String call, int device) {
        if (status != CUBLAS_STATUS_SUCCESS) {
            throw new CudaException("cublas", call, status, cublasGetStatusName(status).getString(),
                    cublasGetStatusString(status).getString(), device);
        }
    }
}
