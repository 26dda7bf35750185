// One error path: each kind of failure maps to its exit code wherever it sits in the cause
// chain (ranks wrap what they throw); only what is none of them is reported as a bug.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.comm.LocalLauncher;
import org.fsdp4j.cuda.CudaException;
import org.junit.jupiter.api.Test;

class ErrorHandlerTest {

    /** What two in-process ranks throw when rank 0 throws {@code failure}. */
    private static RuntimeException fromRanks(Throwable failure) {
        return assertThrows(LocalLauncher.RanksFailedException.class, () -> LocalLauncher.run(
                new LocalGroup(2, Duration.ofSeconds(5)), r -> {
                    if (r == 0) {
                        if (failure instanceof Error e) {
                            throw e;
                        }
                        throw (Exception) failure;
                    }
                    return null;
                }));
    }

    private static ExitCode code(Throwable t) {
        UserError e = ErrorHandler.classify(t);
        return e == null ? ExitCode.INTERNAL : e.exitCode();
    }

    @Test
    void eachFailureGetsItsCode() {
        assertEquals(ExitCode.BAD_INPUT, code(new IllegalArgumentException("--steps must be at least 1")));
        assertEquals(ExitCode.OUTPUT_IN_USE, code(new UserError(ExitCode.OUTPUT_IN_USE, "in use")));
        assertEquals(ExitCode.OUT_OF_MEMORY, code(new OutOfMemoryError("Java heap space")));
        assertEquals(ExitCode.OUT_OF_MEMORY, code(fromRanks(new OutOfMemoryError("malloc of 8 GiB failed"))));
        assertEquals(ExitCode.OUT_OF_MEMORY, code(new IllegalStateException(new CudaException("cudart", "cudaMalloc",
                2, "cudaErrorMemoryAllocation", "out of memory", 0))));
        assertEquals(ExitCode.IO_ERROR, code(new UncheckedIOException("cannot write summary.json: No space left",
                new IOException("No space left on device"))));
        assertEquals(ExitCode.RANK_FAILED, code(fromRanks(new CommException("all-gather timed out after 60 s"))));
    }

    @Test
    void onlyTheRestIsABug() {
        assertNull(ErrorHandler.classify(new NullPointerException()));
        assertNull(ErrorHandler.classify(new IllegalArgumentException()), "a JDK check without a message is not ours");
        assertNull(ErrorHandler.classify(fromRanks(new IllegalStateException("engine state"))));
        assertEquals(ExitCode.INTERNAL, code(new CudaException("cudart", "cudaMemcpy", 700, "cudaErrorIllegalAddress",
                "an illegal memory access", 0)));
    }
}
