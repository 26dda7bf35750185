// The Backend's row-major GEMM on column-major cuBLAS. A row-major matrix with row stride ld
// is, to cuBLAS, its transpose with leading dimension ld; so C = op(A)·op(B) (row-major)
// is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ (column-major): swap the operands and m with n, keep
// each operand's transpose flag. Half operands accumulate in fp32 (CUBLAS_COMPUTE_32F); fp32
// uses TF32 tensor cores only when the backend was asked to.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F;
import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F_FAST_TF32;
import static org.bytedeco.cuda.global.cublas.CUBLAS_GEMM_DEFAULT;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_N;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_T;
import static org.bytedeco.cuda.global.cublas.cublasGemmEx;
import static org.bytedeco.cuda.global.cublas.cublasGemmStridedBatchedEx;
import static org.bytedeco.cuda.global.cudart.CUDA_R_16BF;
import static org.bytedeco.cuda.global.cudart.CUDA_R_16F;
import static org.bytedeco.cuda.global.cudart.CUDA_R_32F;

import org.bytedeco.javacpp.FloatPointer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class CublasGemm {

    private CublasGemm() {
    }

    /** The (A, B, C) dtype triples cublasGemmEx takes with CUBLAS_COMPUTE_32F. */
    static boolean supported(DType a, DType b, DType c) {
        if (a != b || !a.isFloating() || !c.isFloating()) {
            return false;
        }
        return c == DType.F32 || c == a;
    }

    static void gemm(CublasHandle h, int device, boolean allowTf32, boolean transA, boolean transB, int m, int n,
                     int k, float alpha, Tensor a, int lda, long strideA, Tensor b, int ldb, long strideB,
                     float beta, Tensor c, int ldc, long strideC, int batch) {
        int opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
        int opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
        int compute = a.dtype() == DType.F32 && allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        DevicePointer pa = new DevicePointer(DeviceTensors.address(a));
        DevicePointer pb = new DevicePointer(DeviceTensors.address(b));
        DevicePointer pc = new DevicePointer(DeviceTensors.address(c));
        try (FloatPointer alphaP = new FloatPointer(alpha); FloatPointer betaP = new FloatPointer(beta)) {
            if (batch == 1) {
                CublasCheck.check(cublasGemmEx(h.handle(), opB, opA, n, m, k, alphaP, pb, cudaType(b), ldb, pa,
                        cudaType(a), lda, betaP, pc, cudaType(c), ldc, compute, CUBLAS_GEMM_DEFAULT),
                        "cublasGemmEx(" + describe(transA, transB, m, n, k, a, c) + ")", device);
            } else {
                CublasCheck.check(cublasGemmStridedBatchedEx(h.handle(), opB, opA, n, m, k, alphaP, pb, cudaType(b),
                        ldb, strideB, pa, cudaType(a), lda, strideA, betaP, pc, cudaType(c), ldc, strideC, batch,
                        compute, CUBLAS_GEMM_DEFAULT),
                        "cublasGemmStridedBatchedEx(" + describe(transA, transB, m, n, k, a, c) + " ×" + batch + ")",
                        device);
            }
        }
    }

    private static int cudaType(Tensor t) {
        switch (t.dtype()) {
            case F32: return CUDA_R_32F;
            case F16: return CUDA_R_16F;
            case BF16: return CUDA_R_16BF;
            default: throw new IllegalArgumentException("gemm: " + t + " is not a float tensor");
        }
    }

    private static String describe(boolean transA, boolean transB, int m, int n, int k, Tensor a, Tensor c) {
        return (transA ? "T" : "N") + (transB ? "T" : "N") + " m=" + m + " n=" + n + " k=" + k + " "
                + a.dtype().shortName() + "→" + c.dtype().shortName();
    }
}
