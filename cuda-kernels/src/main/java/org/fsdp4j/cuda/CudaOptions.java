// How a CudaBackend is set up: TF32 for fp32 GEMMs (off unless asked: it changes results at
// the 1e-3 level) and the cuBLAS workspace per stream. From system properties
// fsdp4j.cuda.tf32=true and fsdp4j.cuda.cublasWorkspaceMiB=N.
package org.fsdp4j.cuda;

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
        boolean tf32 = Boolean.parseBoolean(System.getProperty("fsdp4j.cuda.tf32", "false"));
        String mib = System.getProperty("fsdp4j.cuda.cublasWorkspaceMiB");
        long ws;
        try {
            ws = mib == null ? DEFAULT_CUBLAS_WORKSPACE_BYTES : Long.parseLong(mib.trim()) << 20;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("fsdp4j.cuda.cublasWorkspaceMiB must be a whole number of MiB, got '"
                    + mib + "'");
        }
        return new CudaOptions(tf32, ws);
    }
}
