// The one place that first touches the CUDA native libraries. A failed load poisons
// org.bytedeco.cuda.global.cudart for the life of the JVM (see shared/reference/javacpp-cuda.md),
// so this runs once, catches LinkageError, and caches both the device count and, when CUDA
// is unusable, one sentence saying why (no driver, a driver too old for this build's CUDA, no
// device, which library is missing).
// Every other CUDA class is reached only after probe().usable() said yes. The test suite's
// stand-in CUDA libraries (cuda-kernels/src/test/standin: host memory and an emulator, not a GPU)
// name their devices "stand-in CUDA, not a GPU"; the probe says so plainly.
package org.fsdp4j.cuda;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.bytedeco.javacpp.Loader;

public final class CudaProbe {

    /** The device name the test suite's stand-in CUDA libraries report. */
    public static final String STAND_IN_NAME = "stand-in CUDA, not a GPU";

    /**
     * What the probe found: a device count, or the reason CUDA cannot be used; and whether the
     * devices are the test suite's stand-ins rather than GPUs.
     */
    public record Result(int deviceCount, Optional<String> unavailableReason, boolean standIn) {
        public boolean usable() {
            return unavailableReason.isEmpty();
        }

        /** One line for logs: "2 CUDA device(s)", "1 stand-in CUDA device(s): stand-in CUDA, not a GPU", or why none. */
        public String describe() {
            if (!usable()) {
                return "CUDA not usable: " + unavailableReason.get();
            }
            return standIn ? deviceCount + " stand-in CUDA device(s): " + STAND_IN_NAME + " (emulated kernels on the CPU)"
                    : deviceCount + " CUDA device(s)";
        }
    }

    /** The CUDA version (1000 * major + 10 * minor) of the runtime this build's bindings were compiled for. */
    static final int BUILT_FOR = org.bytedeco.cuda.global.cudart.CUDART_VERSION;

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
            // Asked of the driver before the runtime, which on a too-old driver says only cudaErrorInsufficientDriver.
            int[] v = {0};
            int driver = org.bytedeco.cuda.global.cudart.cuDriverGetVersion(v) == 0 ? v[0] : 0;
            Optional<String> tooOld = driverTooOld(driver, BUILT_FOR);
            if (tooOld.isPresent()) {
                return unusable(tooOld.get());
            }
            int[] n = {0};
            int rc = org.bytedeco.cuda.global.cudart.cudaGetDeviceCount(n);
            if (rc != org.bytedeco.cuda.global.cudart.cudaSuccess) {
                return unusable(deviceCountError(rc, driver));
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
        return new Result(count, Optional.empty(), isStandIn());
    }

    /** Whether device 0 is the test suite's stand-in (it names itself so). */
    private static boolean isStandIn() {
        org.bytedeco.cuda.cudart.cudaDeviceProp props = new org.bytedeco.cuda.cudart.cudaDeviceProp();
        int rc = org.bytedeco.cuda.global.cudart.cudaGetDeviceProperties(props, 0);
        return rc == org.bytedeco.cuda.global.cudart.cudaSuccess && props.name().getString().startsWith(STAND_IN_NAME);
    }

    private static Result unusable(String reason) {
        return new Result(0, Optional.of(reason), false);
    }

    /** "12.4" for 12040, as CUDA encodes its versions (1000 * major + 10 * minor). */
    static String cudaVersion(int version) {
        return version / 1000 + "." + version % 1000 / 10;
    }

    /**
     * Why a driver that supports CUDA {@code driver} cannot run a runtime built for CUDA {@code built},
     * naming both and the ways out; empty when it can, or when the driver's version is unknown (0).
     */
    static Optional<String> driverTooOld(int driver, int built) {
        // CUDA's minor-version compatibility lets a driver run any newer minor of its major (13.0 runs 13.1):
        // only an older major stops the run.
        if (driver <= 0 || driver / 1000 >= built / 1000) {
            return Optional.empty();
        }
        return Optional.of("the NVIDIA driver supports CUDA " + cudaVersion(driver) + " but this fsdp4j was built for CUDA "
                + cudaVersion(built) + ": " + waysOut(built));
    }

    /** What lets an older driver run fsdp4j built for CUDA {@code built}. */
    private static String waysOut(int built) {
        int major = built / 1000;
        String minimum = major == 13 ? "R580" : major == 12 ? "R525" : null;   // each major's first driver branch
        return "install " + (minimum == null ? "a newer NVIDIA driver" : "NVIDIA driver " + minimum + " or newer")
                + "; or, on a data-centre GPU such as A100 or H100, install the CUDA forward-compatibility package"
                + " cuda-compat-" + major + "-" + built % 1000 / 10 + " and put its folder, /usr/local/cuda/compat in"
                + " nvidia/cuda images, on LD_LIBRARY_PATH";
    }

    private static String deviceCountError(int rc, int driver) {
        String name = org.bytedeco.cuda.global.cudart.cudaGetErrorName(rc).getString();
        if (rc == org.bytedeco.cuda.global.cudart.cudaErrorNoDevice) {
            return "no CUDA device is present (cudaGetDeviceCount: " + name + ")";
        }
        if (rc == org.bytedeco.cuda.global.cudart.cudaErrorInsufficientDriver) {
            return "the NVIDIA driver" + (driver > 0 ? " (CUDA " + cudaVersion(driver) + ")" : "")
                    + " is too old for the CUDA " + cudaVersion(BUILT_FOR) + " runtime of this fsdp4j (cudaGetDeviceCount: "
                    + name + "): " + waysOut(BUILT_FOR);
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
            boolean cache = innermost.contains("Could not create the cache") || innermost.contains("failed to map segment");
            return what + " cannot be loaded: " + innermost + (cache ? "; " + org.fsdp4j.backend.Backends.NATIVE_CACHE_HINT : "");
        }
        if (missing.startsWith("libcuda.so")) {
            return "no NVIDIA driver: " + missing + " cannot be loaded (install the driver, or put the folder"
                    + " holding " + missing + " on LD_LIBRARY_PATH)";
        }
        return "missing CUDA library " + missing + ", needed by " + what
                + " (put the folder that holds it on LD_LIBRARY_PATH)";
    }
}
