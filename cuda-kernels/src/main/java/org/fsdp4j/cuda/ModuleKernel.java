// One kernel of a loaded module: packs the arguments, launches with cuLaunchKernel on a stream
// and checks both the launch's return code and the runtime's last error.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cuLaunchKernel;

import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.javacpp.PointerPointer;

final class ModuleKernel implements Kernel {

    private static final ThreadLocal<KernelArgs> ARGS = ThreadLocal.withInitial(KernelArgs::new);

    private final String name;
    private final CUfunc_st function;
    private final int device;

    ModuleKernel(String name, CUfunc_st function, int device) {
        this.name = name;
        this.function = function;
        this.device = device;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public void launch2d(CudaStream stream, long gridX, int gridY, int blockX, int blockY, int sharedBytes,
                         Object... args) {
        if (gridX <= 0 || gridX > Integer.MAX_VALUE || gridY <= 0 || gridY > 65535) {
            throw new IllegalArgumentException(name + ": grid (" + gridX + ", " + gridY + ") out of range");
        }
        KernelArgs packed = ARGS.get().pack(args);
        int rc = cuLaunchKernel(function, (int) gridX, gridY, 1, blockX, blockY, 1, sharedBytes, stream.handle(),
                packed.slots(), (PointerPointer<?>) null);
        CudaCheck.checkDriver(rc, "cuLaunchKernel(" + name + ")", device);
        CudaCheck.checkLastError(name, device);
    }
}
