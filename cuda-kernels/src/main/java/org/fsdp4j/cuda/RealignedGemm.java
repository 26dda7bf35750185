// A big half-precision GEMM off cuBLAS's 8-element grid, run on padded copies that are on it.
// GPT-2's vocabulary (50257) puts the LM head's three products off the grid, and on an H200
// they ran at 95-146 TFLOP/s where the blocks' ran at 400-880.
// Measured there: realigning only the row strides brought the weight gradient (TN, our m = 50257)
// to 421 TFLOP/s but left the logits (NT, n = 50257) at 104 and the input gradient (NN,
// k = 50257) at 127: an odd n or k keeps cuBLAS off its fast kernels even with aligned strides.
// So n and k are padded to multiples of 8 with zeros (zero terms add nothing; padded columns of
// C are computed and dropped), every row stride is rounded up likewise, and C is copied back.
// The rule (which products, how padded, the workspace) is HalfGemmPadding's, which the planner
// shares; only products of at least its MIN_FLOPS take this path: there the copies (a read and a
// write of each staged operand) and the zero fills cost a few percent of what they save.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaMemcpy2DAsync;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToDevice;

import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.HalfGemmPadding;
import org.fsdp4j.backend.HalfGemmPadding.Operand;

final class RealignedGemm {

    private RealignedGemm() {
    }

    /** C = alpha·op(A)·op(B) + beta·C, row-major, as CudaBackend.gemm, on padded copies where needed. */
    static void gemm(CudaBackend be, CublasHandle h, boolean transA, boolean transB, int m, int n, int k, float alpha,
                     Tensor a, int lda, Tensor b, int ldb, float beta, Tensor c, int ldc) {
        // A is stored [m, k] (or [k, m] transposed), B [k, n] (or [n, k]), C [m, n]; each padded
        // operand is [rows2, cols2] with its extra rows and columns zero.
        Operand pa = HalfGemmPadding.a(transA, m, k, lda);
        Operand pb = HalfGemmPadding.b(transB, n, k, ldb);
        Operand pc = HalfGemmPadding.c(m, n, ldc);
        int n2 = HalfGemmPadding.roundUp(n);
        int k2 = HalfGemmPadding.roundUp(k);
        try (Tensor a2 = pa.staged() ? padded(be, a, pa) : null;
             Tensor b2 = pb.staged() ? padded(be, b, pb) : null;
             Tensor c2 = pc.staged() ? be.allocate(c.dtype(), MemoryCategory.WORKSPACE, pc.rows2(), pc.cols2()) : null) {
            if (c2 != null && beta != 0f) {
                copy2d(be, c, ldc, c2, pc.cols2(), n, m);   // its padded columns are never read back
            }
            CublasGemm.gemm(h, be.deviceIndex(), false, transA, transB, m, n2, k2, alpha,
                    a2 == null ? a : a2, a2 == null ? lda : pa.cols2(), 0,
                    b2 == null ? b : b2, b2 == null ? ldb : pb.cols2(), 0,
                    beta, c2 == null ? c : c2, c2 == null ? ldc : pc.cols2(), 0, 1);
            if (c2 != null) {
                copy2d(be, c2, pc.cols2(), c, ldc, n, m);
            }
        }
    }

    /** The operand copied into a zeroed [rows2, cols2] workspace. */
    private static Tensor padded(CudaBackend be, Tensor t, Operand o) {
        Tensor w = be.allocate(t.dtype(), MemoryCategory.WORKSPACE, o.rows2(), o.cols2());
        if (o.grows()) {
            be.fill(w, 0f);
        }
        copy2d(be, t, o.ld(), w, o.cols2(), o.cols(), o.rows());
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
}
