// A big half-precision GEMM off cuBLAS's 8-element grid, run on padded copies that are on it.
// GPT-2's vocabulary (50257) puts the LM head's three products off the grid, and on an H200
// (bench/NOTES.md, section G) they ran at 95-146 TFLOP/s where the blocks' ran at 500-880.
// Measured there: realigning only the row strides brought the weight gradient (TN, our m = 50257)
// to 421 TFLOP/s but left the logits (NT, n = 50257) at 104 and the input gradient (NN,
// k = 50257) at 127: an odd n or k keeps cuBLAS off its fast kernels even with aligned strides.
// So n and k are padded to multiples of 8 with zeros (zero terms add nothing; padded columns of
// C are computed and dropped), every row stride is rounded up likewise, and C is copied back.
// Only products of at least MIN_FLOPS take this path: there the copies (a read and a write of
// each staged operand) and the zero fills cost a few percent of what they are meant to save.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaMemcpy2DAsync;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToDevice;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;

final class RealignedGemm {

    /** 2^34 FLOPs (~17 GFLOP, ~25 µs at tensor-core speed): below it the copies would not pay. */
    static final long MIN_FLOPS = 1L << 34;
    private static final int ALIGN = 8;   // elements of 2 bytes: 16 bytes

    private RealignedGemm() {
    }

    /** Whether this product (supported dtypes checked by the caller) takes the padded path. */
    static boolean pays(int m, int n, int k, int lda, int ldb, int ldc, DType dtype, int batch) {
        boolean offGrid = n % ALIGN != 0 || k % ALIGN != 0 || lda % ALIGN != 0 || ldb % ALIGN != 0 || ldc % ALIGN != 0;
        return batch == 1 && dtype.byteSize() == 2 && offGrid && 2L * m * n * k >= MIN_FLOPS;
    }

    /** C = alpha·op(A)·op(B) + beta·C, row-major, as CudaBackend.gemm, on padded copies where needed. */
    static void gemm(CudaBackend be, CublasHandle h, boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, Tensor b, int ldb, float beta, Tensor c, int ldc) {
        int n2 = roundUp(n);
        int k2 = roundUp(k);
        // A is stored [m, k] (or [k, m] transposed), B [k, n] (or [n, k]), C [m, n]; each padded
        // operand is [rows2, cols2] with its extra rows and columns zero.
        Operand pa = transA ? new Operand(k, m, lda, k2, roundUp(m)) : new Operand(m, k, lda, m, k2);
        Operand pb = transB ? new Operand(n, k, ldb, n2, k2) : new Operand(k, n, ldb, k2, n2);
        Operand pc = new Operand(m, n, ldc, m, n2);
        try (Tensor a2 = pa.staged() ? padded(be, a, pa) : null;
             Tensor b2 = pb.staged() ? padded(be, b, pb) : null;
             Tensor c2 = pc.staged() ? be.allocate(c.dtype(), MemoryCategory.WORKSPACE, pc.rows2, pc.cols2) : null) {
            if (c2 != null && beta != 0f) {
                copy2d(be, c, ldc, c2, pc.cols2, n, m);   // its padded columns are never read back
            }
            CublasGemm.gemm(h, be.deviceIndex(), false, transA, transB, m, n2, k2, alpha,
                    a2 == null ? a : a2, a2 == null ? lda : pa.cols2, 0,
                    b2 == null ? b : b2, b2 == null ? ldb : pb.cols2, 0,
                    beta, c2 == null ? c : c2, c2 == null ? ldc : pc.cols2, 0, 1);
            if (c2 != null) {
                copy2d(be, c2, pc.cols2, c, ldc, n, m);
            }
        }
    }

    /** An operand stored [rows, cols] with row stride ld, and the [rows2, cols2] it is padded to. */
    private record Operand(int rows, int cols, int ld, int rows2, int cols2) {
        boolean staged() {
            return rows2 != rows || cols2 != cols || ld % ALIGN != 0;
        }

        boolean grows() {
            return rows2 != rows || cols2 != cols;
        }
    }

    /** The operand copied into a zeroed [rows2, cols2] workspace. */
    private static Tensor padded(CudaBackend be, Tensor t, Operand o) {
        Tensor w = be.allocate(t.dtype(), MemoryCategory.WORKSPACE, o.rows2, o.cols2);
        if (o.grows()) {
            be.fill(w, 0f);
        }
        copy2d(be, t, o.ld, w, o.cols2, o.cols, o.rows);
        return w;
    }

    /** Copies {@code rows} rows of {@code cols} elements from src (row stride srcLd) to dst (dstLd). */
    private static void copy2d(CudaBackend be, Tensor src, int srcLd, Tensor dst, int dstLd, int cols, int rows) {
        long es = src.dtype().byteSize();
        CudaCheck.check(cudaMemcpy2DAsync(new DevicePointer(DeviceTensors.address(dst)), dstLd * es,
                new DevicePointer(DeviceTensors.address(src)), srcLd * es, cols * es, rows, cudaMemcpyDeviceToDevice,
                be.currentStream().handle()), "cudaMemcpy2DAsync(" + rows + " rows of " + cols + " " + src.dtype()
                + ", padding a GEMM operand)", be.deviceIndex());
    }

    private static int roundUp(int x) {
        return (x + ALIGN - 1) / ALIGN * ALIGN;
    }
}
