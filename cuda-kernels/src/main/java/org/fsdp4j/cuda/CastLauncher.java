// Launcher for casts.cu.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class CastLauncher {

    private final Kernel cast;

    CastLauncher(KernelSource m) {
        cast = m.kernel("cast_kernel");
    }

    /** dst = src converted (equal numel, float dtypes, no overlap). */
    void cast(CudaStream s, Tensor src, Tensor dst) {
        long n = src.numel();
        cast.launchStrided(s, n, address(src), code(src), address(dst), code(dst), n);
    }
}
