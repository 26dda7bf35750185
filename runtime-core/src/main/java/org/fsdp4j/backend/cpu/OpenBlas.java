// The only class that calls OpenBLAS (through JavaCPP's openblas_nolapack preset), so the
// native surface of the CPU backend is one screen long. Loading it extracts the bundled
// libopenblas on first use; nothing here runs until a CPU backend is created.
package org.fsdp4j.backend.cpu;

import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.openblas.global.openblas_nolapack;

final class OpenBlas {

    private static final int ROW_MAJOR = openblas_nolapack.CblasRowMajor;
    private static final int NO_TRANS = openblas_nolapack.CblasNoTrans;
    private static final int TRANS = openblas_nolapack.CblasTrans;

    private OpenBlas() {
    }

    /** Loads the native library; throws LinkageError when it cannot be loaded here. */
    static void load() {
        Loader.load(openblas_nolapack.class);
    }

    /**
     * OpenBLAS runs single-threaded: its thread count is one process-wide setting that several
     * backends (one per in-process rank) would fight over, and its threaded GEMM rounds
     * differently for each thread count. GemmOp parallelises over tiles on the backend's threads.
     */
    static void useCallerThreadOnly() {
        openblas_nolapack.blas_set_num_threads(1);
    }

    /**
     * Row-major C = alpha · op(A) · op(B) + beta · C on fp32 memory. The pointers' positions are
     * element offsets: JavaCPP scales a position by the parameter's C type, float* here.
     */
    static void sgemm(boolean transA, boolean transB, int m, int n, int k, float alpha,
                      FloatPointer a, int lda, FloatPointer b, int ldb, float beta, FloatPointer c, int ldc) {
        openblas_nolapack.cblas_sgemm(ROW_MAJOR, transA ? TRANS : NO_TRANS, transB ? TRANS : NO_TRANS,
                m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
}
