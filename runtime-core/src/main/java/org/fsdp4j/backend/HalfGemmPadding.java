// The rule by which a GPU backend runs a big half-precision GEMM that is off cuBLAS's 8-element
// grid on zero-padded copies (cuda-kernels' RealignedGemm: an odd n or k, or a row stride not a
// multiple of 8, kept cuBLAS on kernels 4-7x slower on an H200), and the
// workspace those copies take. It lives here, beside the Ops contract, so that the planner counts
// that workspace (GPT-2's vocabulary, 50257, puts the LM head's three products off the grid)
// without knowing CUDA. Row-major, as Ops.gemm: A is [m, k] ([k, m] transposed), B [k, n]
// ([n, k]), C [m, n]; n and k are padded with zeros, every row stride rounded up.
package org.fsdp4j.backend;

import org.fsdp4j.api.DType;

public final class HalfGemmPadding {

    /** Elements of 2 bytes: 16 bytes. */
    public static final int ALIGN = 8;
    /** 2^34 FLOPs (~17 GFLOP, ~25 µs at tensor-core speed): below it the copies would not pay. */
    public static final long MIN_FLOPS = 1L << 34;

    private HalfGemmPadding() {
    }

    /** An operand stored [rows, cols] with row stride ld, and the [rows2, cols2] it is padded to. */
    public record Operand(int rows, int cols, int ld, int rows2, int cols2) {
        /** Whether it is copied (padded, or its stride realigned). */
        public boolean staged() {
            return grows() || ld % ALIGN != 0;
        }

        /** Whether the copy is larger than the operand (its extra rows and columns are zero). */
        public boolean grows() {
            return rows2 != rows || cols2 != cols;
        }

        long bytes(int elementBytes) {
            return staged() ? (long) rows2 * cols2 * elementBytes : 0;
        }
    }

    /** Whether C = op(A)·op(B) of this shape, strides and dtype runs on padded copies. */
    public static boolean pads(int m, int n, int k, int lda, int ldb, int ldc, DType dtype, int batch) {
        boolean offGrid = n % ALIGN != 0 || k % ALIGN != 0 || lda % ALIGN != 0 || ldb % ALIGN != 0 || ldc % ALIGN != 0;
        return batch == 1 && dtype.byteSize() == 2 && offGrid && 2L * m * n * k >= MIN_FLOPS;
    }

    public static int roundUp(int x) {
        return (x + ALIGN - 1) / ALIGN * ALIGN;
    }

    public static Operand a(boolean transA, int m, int k, int lda) {
        return transA ? new Operand(k, m, lda, roundUp(k), roundUp(m)) : new Operand(m, k, lda, m, roundUp(k));
    }

    public static Operand b(boolean transB, int n, int k, int ldb) {
        return transB ? new Operand(n, k, ldb, roundUp(n), roundUp(k)) : new Operand(k, n, ldb, roundUp(k), roundUp(n));
    }

    public static Operand c(int m, int n, int ldc) {
        return new Operand(m, n, ldc, m, roundUp(n));
    }

    /** Bytes of the padded copies this product holds at once (0 where it does not pad). */
    public static long workspaceBytes(boolean transA, boolean transB, int m, int n, int k, int lda, int ldb, int ldc,
                                      DType dtype) {
        if (!pads(m, n, k, lda, ldb, ldc, dtype, 1)) {
            return 0;
        }
        int es = dtype.byteSize();
        return a(transA, m, k, lda).bytes(es) + b(transB, n, k, ldb).bytes(es) + c(m, n, ldc).bytes(es);
    }
}
