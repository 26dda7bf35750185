// What a test needs to know about the fake-GPU mode: the surefire executions "standin-test"
// (cuda-kernels, nccl-comm, samples) start their JVM with -Dfsdp4j.standins=<the stand-ins'
// folder> and JavaCPP's link path on its lib/, so CUDA, cuBLAS and NCCL are the stand-ins
// (StandInToolchain) and nothing else in that JVM can load the real ones. Every gpu-tagged test
// starts with assumeGpu(): it runs on a real GPU or on the stand-ins, and otherwise skips with
// the reason (where the stand-ins could not be built, StandInSummary's one line says why).
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

public final class StandIns {

    /** The system property the fake-GPU test runs set to the stand-ins' folder. */
    public static final String PROPERTY = "fsdp4j.standins";

    private StandIns() {
    }

    /** The stand-ins' folder when this JVM is a fake-GPU test run. */
    public static Optional<Path> folder() {
        return Optional.ofNullable(System.getProperty(PROPERTY)).map(Path::of);
    }

    /** Whether this JVM is a fake-GPU test run (whether or not the stand-ins could be built). */
    public static boolean fakeGpuRun() {
        return folder().isPresent();
    }

    /** In a fake-GPU run, why the stand-ins are missing (no C++ compiler, or not built); else empty. */
    public static Optional<String> unavailable() {
        Optional<Path> f = folder();
        if (f.isEmpty()) {
            return Optional.empty();
        }
        try {
            Path marker = f.get().resolve(StandInToolchain.UNAVAILABLE);
            if (Files.isRegularFile(marker)) {
                return Optional.of(Files.readString(marker).strip());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        for (String lib : StandInToolchain.LIBRARIES) {
            if (!Files.isRegularFile(f.get().resolve("lib").resolve(lib))) {
                return Optional.of("the stand-ins were not built (" + f.get().resolve("lib").resolve(lib)
                        + " is missing): run the cuda-kernels build first");
            }
        }
        return Optional.empty();
    }

    /** Skips the calling test unless CUDA is usable here: a GPU, or the stand-ins in a fake-GPU run. */
    public static CudaProbe.Result assumeGpu() {
        Optional<String> missing = unavailable();
        if (missing.isPresent()) {   // StandInSummary says so in one line at the end of the run
            assumeTrue(false, "stand-in CUDA unavailable: " + missing.get());
        }
        CudaProbe.Result probe = CudaProbe.probe();
        assumeTrue(probe.usable(), () -> "no usable GPU: " + probe.unavailableReason().orElse(""));
        return probe;
    }

    /** Skips unless this JVM runs on the stand-ins (their own checks mean nothing on a GPU). */
    public static CudaProbe.Result assumeStandIns() {
        CudaProbe.Result probe = assumeGpu();
        assumeTrue(probe.standIn(), "runs on the stand-in CUDA only; this is " + probe.describe());
        return probe;
    }
}
