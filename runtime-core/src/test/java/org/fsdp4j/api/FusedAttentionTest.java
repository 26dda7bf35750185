// The CPU backend fuses causal attention per (batch, key/value head) (FusedAttentionOps); the
// composite of batched GEMMs and the causal softmax (CompositeAttention, every other backend's
// path) is the reference. Multi-head attention must give the same bits (the same per-head GEMM
// calls and softmax rows); grouped-query attention sums dk and dv head by head instead of in one
// GEMM over the group, so it agrees to fp32 rounding. Sequence lengths off the vector width
// exercise the row loops' tails.
package org.fsdp4j.api;

import static org.fsdp4j.testing.RandomTensors.gaussian;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.fsdp4j.backend.cpu.CpuBackend;
import org.junit.jupiter.api.Test;

class FusedAttentionTest {

    @Test
    void multiHeadAttentionGivesTheCompositesBits() {
        check(2, 4, 4, 37, 16, 0.0);
        check(1, 3, 3, 64, 32, 0.0);
    }

    @Test
    void groupedQueryAttentionAgreesToRounding() {
        check(2, 4, 2, 29, 16, 2e-6);
        check(1, 6, 1, 50, 8, 2e-6);
    }

    /** Fused vs composite on random inputs; tol 0 demands equal bits, else |Δ| ≤ tol · max|ref|. */
    private static void check(int b, int h, int kv, int t, int d, double tol) {
        Random r = new Random(31L * h + kv + t);
        for (int threads : new int[] {1, 2}) {
            try (CpuBackend be = new CpuBackend(new MemoryTracker("attn"), threads)) {
                Tensor q = gaussian(be, r, b, h, t, d);
                Tensor k = gaussian(be, r, b, kv, t, d);
                Tensor v = gaussian(be, r, b, kv, t, d);
                Tensor dy = gaussian(be, r, b, h, t, d);
                float scale = (float) (1 / Math.sqrt(d));
                Tensor[] fused = run(be, q, k, v, dy, scale, true);
                Tensor[] ref = run(be, q, k, v, dy, scale, false);
                String[] names = {"att", "yHeads", "dq", "dk", "dv"};
                for (int i = 0; i < names.length; i++) {
                    float[] f = be.toHost(fused[i]);
                    float[] e = be.toHost(ref[i]);
                    String what = names[i] + " (B " + b + ", H " + h + ", Hkv " + kv + ", T " + t + ", D " + d
                            + ", threads " + threads + ")";
                    if (tol == 0) {
                        assertArrayEquals(e, f, what);
                    } else {
                        double max = 0;
                        double worst = 0;
                        for (int j = 0; j < e.length; j++) {
                            max = Math.max(max, Math.abs(e[j]));
                            worst = Math.max(worst, Math.abs(e[j] - f[j]));
                        }
                        assertTrue(worst <= tol * max, what + ": worst |Δ| " + worst + " > " + tol + " · " + max);
                    }
                }
            }
        }
    }

    /** {att, yHeads, dq, dk, dv} through the backend's fused op or the composite. */
    private static Tensor[] run(CpuBackend be, Tensor q, Tensor k, Tensor v, Tensor dy, float scale, boolean fused) {
        Tensor att = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, q.dim(0), q.dim(1), q.dim(2), q.dim(2));
        Tensor y = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, q.shape());
        Tensor dq = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, q.shape());
        Tensor dk = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, k.shape());
        Tensor dv = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, v.shape());
        for (Tensor x : new Tensor[] {att, y, dq, dk, dv}) {
            be.fill(x, Float.NaN);   // every element must be written
        }
        if (fused) {
            be.causalAttentionForward(q, k, v, scale, att, y);
            be.causalAttentionBackward(q, k, v, att, dy, scale, dq, dk, dv);
        } else {
            CompositeAttention.forward(be, q, k, v, scale, att, y);
            CompositeAttention.backward(be, q, k, v, att, dy, scale, dq, dk, dv);
        }
        return new Tensor[] {att, y, dq, dk, dv};
    }
}
