// RealignedGemm: which products take the padded path (big, half precision, n, k or a row stride off
// the 8-element grid), and, on a GPU or the stand-in, that the padded product equals cuBLAS on the
// original operands for every transpose, with beta 0 and 1, odd strides or aligned ones, and the
// elements between C's rows left alone.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.HalfGemmPadding;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

class RealignedGemmTest {

    @Test
    void onlyBigHalfProductsWithAMisalignedStrideAreRealigned() {
        DType bf16 = DType.BF16;
        // GPT-2's LM head at 8192 tokens: logits [8192, 50257]
        assertTrue(HalfGemmPadding.pads(8192, 50257, 768, 768, 768, 50257, bf16, 1));
        assertTrue(HalfGemmPadding.pads(8192, 768, 50257, 50257, 768, 768, bf16, 1));
        assertTrue(HalfGemmPadding.pads(8192, 50257, 768, 768, 768, 50264, bf16, 1), "n odd, strides aligned");
        assertTrue(HalfGemmPadding.pads(8192, 768, 50257, 50264, 768, 768, bf16, 1), "k odd, strides aligned");
        assertFalse(HalfGemmPadding.pads(50257, 768, 8192, 50264, 768, 768, bf16, 1), "only m odd: cuBLAS is fast there");
        assertFalse(HalfGemmPadding.pads(8192, 50304, 768, 768, 768, 50304, bf16, 1), "aligned");
        assertFalse(HalfGemmPadding.pads(8192, 50257, 768, 768, 768, 50257, DType.F32, 1), "fp32 has no such cliff");
        assertFalse(HalfGemmPadding.pads(64, 57, 64, 64, 64, 57, bf16, 1), "too small to pay for the copies");
        assertFalse(HalfGemmPadding.pads(8192, 50257, 768, 768, 768, 50257, bf16, 2), "batched");
    }

    @Test
    @Tag("gpu")
    void realignedProductsEqualCublasOnTheOriginalStrides() {
        int m = 37, n = 45, k = 29;
        try (CudaBackend be = CudaRuntimeTest.gpu(new MemoryTracker("realigned"), CudaOptions.defaults())) {
            CublasHandle h = be.cublas();
            for (boolean transA : new boolean[] {false, true}) {
                for (boolean transB : new boolean[] {false, true}) {
                    for (float beta : new float[] {0f, 1f}) {
                      for (boolean alignedStrides : new boolean[] {false, true}) {   // m, n, k are odd either way
                        int lda = alignedStrides ? 40 : (transA ? m : k) + 3;
                        int ldb = alignedStrides ? 48 : (transB ? k : n) + 5;
                        int ldc = alignedStrides ? 48 : n + 1;
                        try (Tensor a = random(be, (transA ? k : m) * (long) lda, 1);
                             Tensor b = random(be, (transB ? n : k) * (long) ldb, 2);
                             Tensor c1 = random(be, m * (long) ldc, 3);
                             Tensor c2 = random(be, m * (long) ldc, 3)) {
                            CublasGemm.gemm(h, 0, false, transA, transB, m, n, k, 0.5f, a, lda, 0, b, ldb, 0, beta, c1,
                                    ldc, 0, 1);
                            RealignedGemm.gemm(be, h, transA, transB, m, n, k, 0.5f, a, lda, b, ldb, beta, c2, ldc);
                            float[] want = be.toHost(c1);
                            float[] got = be.toHost(c2);
                            String what = (transA ? "T" : "N") + (transB ? "T" : "N") + " beta " + beta
                                    + (alignedStrides ? ", aligned strides" : "");
                            for (int i = 0; i < want.length; i++) {
                                if (i % ldc >= n) {   // between rows: untouched, still the fill
                                    assertEquals(want[i], got[i], 0f, what + ": padding element " + i + " was written");
                                } else {   // one bf16 rounding apart at most (cuBLAS may sum in another order)
                                    assertEquals(want[i], got[i], Math.abs(want[i]) * 0x1p-7 + 1e-3, what + ": element " + i);
                                }
                            }
                        }
                      }
                    }
                }
            }
        }
    }

    private static Tensor random(CudaBackend be, long numel, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] host = new float[(int) numel];
        for (int i = 0; i < host.length; i++) {
            host[i] = (float) (r.nextDouble() * 2 - 1);
        }
        Tensor t = be.allocate(DType.BF16, MemoryCategory.WORKSPACE, numel);
        be.copyFromHost(host, 0, t);
        return t;
    }
}
