// --device resolution through ServiceLoader with the CUDA provider on the classpath. On a
// machine without a usable GPU (CI), "auto" must fall back to cpu with exactly one line
// naming the reason and "cuda" must fail with that reason; on a GPU machine "auto" picks it.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.Device;
import org.fsdp4j.backend.Backends;
import org.junit.jupiter.api.Test;

class DeviceResolutionTest {

    @Test
    void theCudaProviderIsFoundByServiceLoader() {
        assertTrue(Backends.provider(Device.Kind.CUDA).orElseThrow() instanceof CudaBackendProvider);
    }

    @Test
    void autoFallsBackToCpuWithOneLineNamingTheReason() {
        CudaProbe.Result probe = CudaProbe.probe();
        List<String> log = new ArrayList<>();
        Device d = Backends.resolve("auto", log::add);
        if (probe.usable()) {
            assertEquals(Device.cuda(0), d);
            assertEquals(List.of(), log);
        } else {
            assertEquals(Device.CPU, d);
            assertEquals(1, log.size(), log.toString());
            assertTrue(log.get(0).contains(probe.unavailableReason().get()), log.get(0));
        }
    }

    @Test
    void cudaWithoutAGpuIsAnErrorCarryingTheReason() {
        CudaProbe.Result probe = CudaProbe.probe();
        if (probe.usable()) {
            assertEquals(Device.cuda(0), Backends.resolve("cuda", s -> { }));
            return;
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Backends.resolve("cuda", s -> { }));
        assertTrue(e.getMessage().contains(probe.unavailableReason().get()), e.getMessage());
        IllegalStateException direct = assertThrows(IllegalStateException.class,
                () -> new CudaBackendProvider().create(Device.cuda(0), new org.fsdp4j.api.MemoryTracker("t"),
                        new org.fsdp4j.backend.BackendOptions(0, false)));
        assertTrue(direct.getMessage().contains(probe.unavailableReason().get()), direct.getMessage());
    }

    @Test
    void aMissingLibraryIsNamed() {
        // The shapes of the errors JavaCPP raises (reference/javacpp-cuda.md, section 5).
        UnsatisfiedLinkError driver = new UnsatisfiedLinkError("no jnicudart in java.library.path");
        driver.initCause(new UnsatisfiedLinkError("/root/.javacpp/cache/cuda.jar/libjnicudart.so: libcuda.so.1: "
                + "cannot open shared object file: No such file or directory"));
        assertTrue(CudaProbe.loadFailure(driver, "the CUDA runtime").startsWith("no NVIDIA driver: libcuda.so.1"));
        UnsatisfiedLinkError cublas = new UnsatisfiedLinkError("no jnicublas in java.library.path");
        cublas.initCause(new UnsatisfiedLinkError("/x/libjnicublas.so: libcublas.so.13: cannot open shared object file"));
        assertTrue(CudaProbe.loadFailure(cublas, "cuBLAS").startsWith("missing CUDA library libcublas.so.13, needed by cuBLAS"));
        assertTrue(CudaProbe.loadFailure(new NoClassDefFoundError("odd"), "cuBLAS").contains("odd"));
    }

    @Test
    void onThisMachineTheReasonSaysWhatIsMissing() {
        CudaProbe.Result probe = CudaProbe.probe();
        System.out.println("CUDA probe: " + probe.describe());
        if (!probe.usable()) {
            String why = probe.unavailableReason().get();
            assertTrue(why.contains("lib") || why.contains("device") || why.contains("driver") || why.contains("nvcc"), why);
        }
    }
}
