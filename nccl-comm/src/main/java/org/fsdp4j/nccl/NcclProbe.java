// Whether NCCL can be used in this JVM, probed once: CUDA must be usable (CudaProbe) and the
// JavaCPP NCCL bindings must load libnccl.so.2 (a LinkageError says which library is missing).
package org.fsdp4j.nccl;

import java.util.Optional;
import org.bytedeco.cuda.global.nccl;
import org.bytedeco.javacpp.Loader;
import org.fsdp4j.cuda.CudaProbe;

final class NcclProbe {

    private static final class Once {
        static final Optional<String> REASON = probe();
    }

    private NcclProbe() {
    }

    /** Empty when NCCL is usable; otherwise why not. */
    static Optional<String> unavailableReason() {
        return Once.REASON;
    }

    private static Optional<String> probe() {
        CudaProbe.Result cuda = CudaProbe.probe();
        if (!cuda.usable()) {
            return cuda.unavailableReason();
        }
        try {
            Loader.load(nccl.class);
            return Optional.empty();
        } catch (LinkageError e) {
            return Optional.of("NCCL could not be loaded (" + e.getMessage() + "): install libnccl2 for CUDA "
                    + org.bytedeco.cuda.global.cudart.CUDART_VERSION / 1000 + ", or put"
                    + " the folder holding libnccl.so.2 on LD_LIBRARY_PATH");
        }
    }
}
