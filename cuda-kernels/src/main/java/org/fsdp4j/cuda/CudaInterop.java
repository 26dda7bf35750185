// What another module's native code (NCCL, in nccl-comm) needs from the CUDA backend, and no more:
// a tensor's device address, a stream's CUDA handle, and making a backend's GPU current on the
// calling thread. Everything else about device memory and streams stays package-private here.
package org.fsdp4j.cuda;

import org.bytedeco.cuda.cudart.CUstream_st;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

public final class CudaInterop {

    private CudaInterop() {
    }

    /** The device address of {@code t}'s first element; t must be an open tensor in CUDA memory. */
    public static long address(Tensor t) {
        return DeviceTensors.address(t);
    }

    /** The CUDA handle of an open stream of a CUDA backend. */
    public static CUstream_st streamHandle(Backend.Stream stream) {
        if (!(stream instanceof CudaStream s)) {
            throw new IllegalArgumentException(stream + " is not a CUDA stream");
        }
        return s.handle();
    }

    /** The GPU index of a CUDA backend. */
    public static int deviceIndex(Backend backend) {
        return cuda(backend).device().index();
    }

    /** Makes {@code backend}'s GPU (and its primary context) current on the calling thread. */
    public static void makeCurrent(Backend backend) {
        cuda(backend).enter();
    }

    private static CudaBackend cuda(Backend backend) {
        if (!(backend instanceof CudaBackend b)) {
            throw new IllegalArgumentException(backend + " is not a CUDA backend");
        }
        return b;
    }
}
