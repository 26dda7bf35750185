// The fatbin (all our kernels, every architecture) loaded into one device's primary context
// with cuModuleLoadData; kernels are looked up by their extern "C" names once and cached.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cuModuleGetFunction;
import static org.bytedeco.cuda.global.cudart.cuModuleLoadData;
import static org.bytedeco.cuda.global.cudart.cuModuleUnload;

import java.util.HashMap;
import java.util.Map;
import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUmod_st;
import org.bytedeco.javacpp.BytePointer;

final class CudaModule implements KernelSource, AutoCloseable {

    private final int device;
    private final CUmod_st module = new CUmod_st();
    private final Map<String, Kernel> kernels = new HashMap<>();
    private boolean closed;

    /** Loads into the current context, which must be {@code device}'s. */
    CudaModule(int device) {
        this.device = device;
        byte[] image = KernelImage.bytes().orElseThrow(() -> new IllegalStateException(
                "this build has no GPU kernels (" + KernelImage.RESOURCE + " is missing): rebuild with nvcc"));
        try (BytePointer data = new BytePointer(image)) {
            CudaCheck.checkDriver(cuModuleLoadData(module, data), "cuModuleLoadData(" + KernelImage.RESOURCE + ")",
                    device);
        }
    }

    @Override
    public synchronized Kernel kernel(String name) {
        if (closed) {
            throw new IllegalStateException("kernel module of cuda:" + device + " is closed");
        }
        return kernels.computeIfAbsent(name, n -> {
            CUfunc_st f = new CUfunc_st();
            CudaCheck.checkDriver(cuModuleGetFunction(f, module, n), "cuModuleGetFunction(" + n + ")", device);
            return new ModuleKernel(n, f, device);
        });
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            CudaCheck.checkDriver(cuModuleUnload(module), "cuModuleUnload", device);
        }
    }
}
