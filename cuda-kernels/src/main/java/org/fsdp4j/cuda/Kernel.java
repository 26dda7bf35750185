// One kernel of the fatbin module. launch() packs the arguments, launches on a stream and
// checks both the launch's return code and the runtime's last error.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cuLaunchKernel;

import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.javacpp.PointerPointer;

final class Kernel {

    private static final ThreadLocal<KernelArgs> ARGS = ThreadLocal.withInitial(KernelArgs::new);

    private final String name;
    private final CUfunc_st function;
    private final int device;

    Kernel(String name, CUfunc_st function, int device) {
        this.name = name;
        this.function = function;
        this.device = device;
    }

    String name() {
        return name;
    }

    /** 1-D launch. */
    void launch(CudaStream stream, long gridX, int blockX, Object... args) {
        launch2d(stream, gridX, 1, blockX, 1, 0, args);
    }

    void launch2d(CudaStream stream, long gridX, int gridY, int blockX, int blockY, int sharedBytes, Object... args) {
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
