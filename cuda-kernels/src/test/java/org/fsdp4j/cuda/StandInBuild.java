// The test build's step that makes the stand-in CUDA libraries (StandInToolchain) before the
// fake-GPU test runs start: Maven runs it in process-test-classes (exec:java, the module folder as
// its argument). It never fails the build for want of a compiler: it says so in one line and the
// fake-GPU tests skip with the same reason.
package org.fsdp4j.cuda;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Optional;

public final class StandInBuild {

    private StandInBuild() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            throw new IllegalArgumentException("usage: StandInBuild MODULE_DIR");
        }
        Path module = Path.of(args[0]).toAbsolutePath();
        long start = System.nanoTime();
        Optional<String> why = StandInToolchain.build(module);
        if (why.isPresent()) {
            System.out.println("[stand-in] not built: " + why.get() + "; the fake-GPU tests will skip");
        } else {
            System.out.printf("[stand-in] CUDA, cuBLAS and NCCL stand-ins ready in %s (%.1f s)%n",
                    module.relativize(module.resolve(StandInToolchain.FOLDER).resolve("lib")),
                    (System.nanoTime() - start) / 1e9);
        }
    }
}
