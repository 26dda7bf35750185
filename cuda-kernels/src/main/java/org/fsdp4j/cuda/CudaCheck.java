// The checked-call helper for the CUDA runtime and driver APIs (both live in global.cudart):
// every return code goes through here and becomes a CudaException naming the call.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.CUDA_SUCCESS;
import static org.bytedeco.cuda.global.cudart.cuGetErrorName;
import static org.bytedeco.cuda.global.cudart.cuGetErrorString;
import static org.bytedeco.cuda.global.cudart.cudaGetErrorName;
import static org.bytedeco.cuda.global.cudart.cudaGetErrorString;
import static org.bytedeco.cuda.global.cudart.cudaGetLastError;
import static org.bytedeco.cuda.global.cudart.cudaSuccess;

import org.bytedeco.javacpp.BytePointer;

final class CudaCheck {

    private CudaCheck() {
    }

    /** Checks a runtime-API (cuda*) return code. */
    static void check(int rc, String call, int device) {
        if (rc != cudaSuccess) {
            throw new CudaException("cudart", call, rc, cudaGetErrorName(rc).getString(),
                    cudaGetErrorString(rc).getString(), device);
        }
    }

    /** Checks a driver-API (cu*) return code. */
    static void checkDriver(int rc, String call, int device) {
        if (rc != CUDA_SUCCESS) {
            throw new CudaException("driver", call, rc, driverString(rc, true), driverString(rc, false), device);
        }
    }

    /** Checks (and clears) the runtime's sticky last error, after a kernel launch. */
    static void checkLastError(String afterCall, int device) {
        check(cudaGetLastError(), "cudaGetLastError after " + afterCall, device);
    }

    private static String driverString(int rc, boolean name) {
        BytePointer text = new BytePointer();
        int r = name ? cuGetErrorName(rc, text) : cuGetErrorString(rc, text);
        return r == CUDA_SUCCESS && !text.isNull() ? text.getString() : "CUresult " + rc;
    }
}
