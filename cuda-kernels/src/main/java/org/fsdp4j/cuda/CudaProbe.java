// The one place that first touches the CUDA native libraries. A failed load poisons
// org.bytedeco.cuda.global.cudart for the life of the JVM (see shared/reference/javacpp-cuda.md),
// so this runs once, catches LinkageError, and caches both the device count and, when CUDA
// is unusable, one sentence saying why (no driver, no device, which library is missing).
// Every other CUDA class is reached only after probe().usable() said yes.
package org.fsdp4j.cuda;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.bytedeco.javacpp.Loader;

public final class CudaProbe {

    /** What the probe found: a device count, or the reason CUDA cannot be used. */
    public record Result(int deviceCount, Optional<String> unavailableReason) {
        public boolean usable() {
            return unavailableReason.isEmpty();
        }
    }

    private static final Pattern MISSING_LIBRARY =
            Pattern.compile("(lib[A-Za-z0-9_.+-]+\\.so[0-9.]*): cannot open shared object file");

    private static volatile Result result;

    private CudaProbe() {
    }

    /** Probes on the first call (loading cudart and cuBLAS), then answers from the cache. */
    public static Result probe() {
        Result r = result;
        if (r == null) {
            synchronized (CudaProbe.class) {
                r = result;
                if (r == null) {
                    r = run();
                    result = r;
                }
            }
        }
        return r;
    }

    private static Result run() {
        int count;
        try {
            Loader.load(org.bytedeco.cuda.global.cudart.class);
            int[] n = {0};
            int rc = org.bytedeco.cuda.global.cudart.cudaGetDeviceCount(n);
            if (rc != org.bytedeco.cuda.global.cudart.cudaSuccess) {
                return unusable(deviceCountError(rc));
            }
            count = n[0];
        } catch (LinkageError e) {
            return unusable(loadFailure(e, "the CUDA runtime"));
        }
        if (count == 0) {
            return unusable("no CUDA device is visible (the driver loaded but reports 0 GPUs; check CUDA_VISIBLE_DEVICES)");
        }
        try {
            Loader.load(org.bytedeco.cuda.global.cublas.class);
        } catch (LinkageError e) {
            return unusable(loadFailure(e, "cuBLAS"));
        }
        if (KernelImage.bytes().isEmpty()) {
            return unusable("this build has no GPU kernels: nvcc was not found when cuda-kernels was built"
                    + " (put nvcc on PATH or set CUDA_HOME, then rebuild)");
        }
        return new Result(count, Optional.empty());
    }

    private static Result unusable(String reason) {
        return new Result(0, Optional.of(reason));
    }

    private static String deviceCountError(int rc) {
        String name = org.bytedeco.cuda.global.cudart.cudaGetErrorName(rc).getString();
        if (rc == org.bytedeco.cuda.global.cudart.cudaErrorNoDevice) {
            return "no CUDA device is present (cudaGetDeviceCount: " + name + ")";
        }
        if (rc == org.bytedeco.cuda.global.cudart.cudaErrorInsufficientDriver) {
            return "the NVIDIA driver is too old for the CUDA 13 runtime (cudaGetDeviceCount: " + name + ")";
        }
        return "cudaGetDeviceCount failed: " + name + " ("
                + org.bytedeco.cuda.global.cudart.cudaGetErrorString(rc).getString() + ")";
    }

    /** Names the shared library that could not be loaded, from the innermost cause that says so. */
    static String loadFailure(Throwable e, String what) {
        String missing = null;
        String innermost = e.toString();
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            innermost = String.valueOf(t.getMessage());
            Matcher m = MISSING_LIBRARY.matcher(innermost);
            if (m.find()) {
                missing = m.group(1);
            }
        }
        if (missing == null) {
            return what + " cannot be loaded: " + innermost;
        }
        if (missing.startsWith("libcuda.so")) {
            return "no NVIDIA driver: " + missing + " cannot be loaded (install the driver, or put the folder"
                    + " holding " + missing + " on LD_LIBRARY_PATH)";
        }
        return "missing CUDA library " + missing + ", needed by " + what
                + " (put the folder that holds it on LD_LIBRARY_PATH)";
    }
}
