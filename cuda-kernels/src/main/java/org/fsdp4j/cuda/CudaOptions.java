// How a CudaBackend is set up: TF32 for fp32 GEMMs (off unless asked: it changes results at
// the 1e-3 level) and the cuBLAS workspace per stream. From system properties
// fsdp4j.cuda.tf32=true and fsdp4j.cuda.cublasWorkspaceMiB=N.
package org.fsdp4j.cuda;

import java.util.OptionalLong;
import org.fsdp4j.backend.Fsdp4jSystemProperties;

public record CudaOptions(boolean allowTf32, long cublasWorkspaceBytes) {

    /** cuBLAS asks for 32 MiB on Hopper and Blackwell, less elsewhere. */
    public static final long DEFAULT_CUBLAS_WORKSPACE_BYTES = 32L << 20;

    public CudaOptions {
        if (cublasWorkspaceBytes < 0) {
            throw new IllegalArgumentException("cuBLAS workspace must be >= 0 bytes, got " + cublasWorkspaceBytes);
        }
    }

    public static CudaOptions defaults() {
        return new CudaOptions(false, DEFAULT_CUBLAS_WORKSPACE_BYTES);
    }

    public static CudaOptions fromSystemProperties() {
        OptionalLong mib = Fsdp4jSystemProperties.cudaCublasWorkspaceMiB();
        return new CudaOptions(Fsdp4jSystemProperties.cudaTf32(),
                mib.isPresent() ? mib.getAsLong() << 20 : DEFAULT_CUBLAS_WORKSPACE_BYTES);
    }
}
