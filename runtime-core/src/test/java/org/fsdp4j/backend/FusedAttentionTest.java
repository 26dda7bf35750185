// The CPU backend fuses causal attention per (batch, key/value head) (FusedAttentionOps); the
// composite of batched GEMMs and the causal softmax (CompositeAttention, every other backend's
// path) is the reference. The fusion's products are its own register-tiled GEMM (fused
// multiply-adds in p order) where the composite's are OpenBLAS's, and grouped-query attention
// sums dk and dv head by head instead of in one GEMM over the group, so both agree to fp32
// rounding; the fusion's own bits do not depend on the thread count. Sequence lengths off the
// vector width and the 6-row tiles exercise the row loops' tails and the padded tiles, T > 64
// more than one column tile. The in-place variant over a fused projection (causalSelfAttention*)
// is held to the composite's split, attend and merge the same way. The fused ops also keep att as
// the lower triangle only (what the CPU backend asks the model for in fp32), with the same bits.
package org.fsdp4j.backend;

import static org.fsdp4j.testing.RandomTensors.gaussian;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.cpu.CpuBackend;
import org.junit.jupiter.api.Test;

class FusedAttentionTest {

    /** |fused − composite| ≤ TOL · max|composite|, per output. */
    private static final double TOL = 2e-6;

    @Test
    void multiHeadAttentionAgreesToRounding() {
        check(2, 4, 4, 37, 16, TOL);
        check(1, 3, 3, 64, 32, TOL);
        check(1, 2, 2, 150, 16, TOL);    // 25 row tiles, 3 column tiles
        check(1, 2, 2, 70, 64, TOL);     // D of a GPT head
        check(1, 2, 2, 9, 100, TOL);     // D off the column tile
    }

    @Test
    void groupedQueryAttentionAgreesToRounding() {
        check(2, 4, 2, 29, 16, TOL);
        check(1, 6, 1, 50, 8, TOL);
        check(2, 4, 2, 130, 16, TOL);
    }

    @Test
    void fusedProjectionInPlaceAgreesWithSplitAttendMerge() {
        checkPacked(2, 4, 4, 37, 16, TOL);
        checkPacked(1, 2, 2, 150, 16, TOL);
        checkPacked(2, 4, 2, 130, 8, TOL);
    }

    @Test
    void theLowerTriangleKeepsTheSquaresBitsAndHalfItsBytes() {
        try (CpuBackend be = new CpuBackend(new MemoryTracker("attn"), 2)) {
            assertArrayEquals(new long[] {2, 3, 15}, be.causalAttentionSavedShape(DType.F32, 2, 3, 5));
            assertArrayEquals(new long[] {2, 3, 5, 5}, be.causalAttentionSavedShape(DType.F16, 2, 3, 5),
                    "half precision takes the composite, which reads the square");
            for (int t : new int[] {1, 7, 37, 70}) {
                int b = 2;
                int h = 4;
                int kv = 2;
                int d = 16;
                Random r = new Random(t);
                Tensor q = gaussian(be, r, b, h, t, d);
                Tensor k = gaussian(be, r, b, kv, t, d);
                Tensor v = gaussian(be, r, b, kv, t, d);
                Tensor dy = gaussian(be, r, b, h, t, d);
                Tensor qkv = gaussian(be, r, b, t, (long) (h + 2 * kv) * d);
                Tensor dyMerged = gaussian(be, r, b, t, (long) h * d);
                float scale = (float) (1 / Math.sqrt(d));
                String where = "T " + t;
                Tensor[] square = run(be, q, k, v, dy, scale, true);
                Tensor[] triangle = run(be, q, k, v, dy, scale, true, be.causalAttentionSavedShape(DType.F32, b, h, t));
                sameTriangle(be, square[0], triangle[0], t, where);
                for (int i = 1; i < square.length; i++) {
                    assertArrayEquals(be.toHost(square[i]), be.toHost(triangle[i]), "output " + i + ", " + where);
                }
                Tensor[] squareSelf = runSelf(be, qkv, dyMerged, h, kv, scale, b, h, t, t);
                Tensor[] triangleSelf = runSelf(be, qkv, dyMerged, h, kv, scale, be.causalAttentionSavedShape(DType.F32, b, h, t));
                sameTriangle(be, squareSelf[0], triangleSelf[0], t, "self-attention, " + where);
                for (int i = 1; i < squareSelf.length; i++) {
                    assertArrayEquals(be.toHost(squareSelf[i]), be.toHost(triangleSelf[i]), "self-attention output " + i
                            + ", " + where);
                }
            }
            Random r = new Random(3);
            Tensor q = gaussian(be, r, 1, 2, 6, 4);
            Tensor triangle = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, 1, 2, 21);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> CompositeAttention.forward(be, q, q, q, 1f, triangle, q));
            assertTrue(e.getMessage().contains("att (B, H, T, T)") && !e.getMessage().contains("T·(T + 1)/2"),
                    "the composite reads only the square: " + e.getMessage());
            Tensor wrong = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, 1, 2, 20);
            e = assertThrows(IllegalArgumentException.class, () -> be.causalAttentionForward(q, q, q, 1f, wrong, q));
            assertTrue(e.getMessage().contains("or (B, H, T·(T + 1)/2)"), e.getMessage());
        }
    }

    /** Row i of each head of the triangle is the first i + 1 elements of row i of the square; the rest of the square is 0. */
    private static void sameTriangle(CpuBackend be, Tensor square, Tensor triangle, int t, String where) {
        float[] sq = be.toHost(square);
        float[] tri = be.toHost(triangle);
        long heads = sq.length / ((long) t * t);
        assertTrue(tri.length == heads * t * (t + 1) / 2, "triangle numel, " + where);
        for (int head = 0; head < heads; head++) {
            for (int i = 0; i < t; i++) {
                for (int j = 0; j < t; j++) {
                    float s = sq[(head * t + i) * t + j];
                    if (j <= i) {
                        float x = tri[head * t * (t + 1) / 2 + i * (i + 1) / 2 + j];
                        assertTrue(Float.floatToIntBits(s) == Float.floatToIntBits(x), "att[" + head + ", " + i + ", "
                                + j + "] " + x + " vs the square's " + s + ", " + where);
                    } else {
                        assertTrue(s == 0f, "above the diagonal, " + where);
                    }
                }
            }
        }
    }

    /** {att, y, dqkv} of the CPU's in-place attention over a fused projection, att shaped {@code attShape}. */
    private static Tensor[] runSelf(CpuBackend be, Tensor qkv, Tensor dy, int h, int kv, float scale, long... attShape) {
        Tensor att = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, attShape);
        Tensor y = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, dy.shape());
        Tensor dqkv = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, qkv.shape());
        for (Tensor x : new Tensor[] {att, y, dqkv}) {
            be.fill(x, Float.NaN);   // every element must be written
        }
        be.causalSelfAttentionForward(qkv, h, kv, scale, att, y);
        be.causalSelfAttentionBackward(qkv, att, dy, h, kv, scale, dqkv);
        return new Tensor[] {att, y, dqkv};
    }

    @Test
    void shapesThatDoNotFitAreRefusedNamingTheLayout() {
        try (CpuBackend be = new CpuBackend(new MemoryTracker("attn"), 1)) {
            Random r = new Random(5);
            Tensor q = gaussian(be, r, 1, 4, 8, 4);
            Tensor k = gaussian(be, r, 1, 3, 8, 4);   // 3 key/value heads do not divide 4
            Tensor att = gaussian(be, r, 1, 4, 8, 8);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> be.causalAttentionForward(q, k, k, 1f, att, q));
            assertTrue(e.getMessage().contains("Hkv dividing H"), e.getMessage());
            Tensor qkv = gaussian(be, r, 1, 8, 3 * 16);
            Tensor y = gaussian(be, r, 1, 8, 12);       // should be (1, 8, 16)
            e = assertThrows(IllegalArgumentException.class, () -> be.causalSelfAttentionForward(qkv, 4, 4, 1f, att, y));
            assertTrue(e.getMessage().contains("y (B, T, H·D)"), e.getMessage());
        }
    }

    /** causalSelfAttention{Forward,Backward} on the CPU (in place) vs the composite (split, attend, merge). */
    private static void checkPacked(int b, int h, int kv, int t, int d, double tol) {
        float[][] oneThread = null;
        for (int threads : new int[] {1, 2}) {
            Random r = new Random(17L * h + kv + t);   // the same inputs at each thread count
            try (CpuBackend be = new CpuBackend(new MemoryTracker("attn"), threads)) {
                Tensor qkv = gaussian(be, r, b, t, (long) (h + 2 * kv) * d);
                Tensor dy = gaussian(be, r, b, t, (long) h * d);
                float scale = (float) (1 / Math.sqrt(d));
                Tensor[] fused = new Tensor[3];
                Tensor[] ref = new Tensor[3];
                for (Tensor[] out : new Tensor[][] {fused, ref}) {
                    out[0] = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, b, h, t, t);
                    out[1] = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, b, t, (long) h * d);
                    out[2] = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, qkv.shape());
                    for (Tensor x : out) {
                        be.fill(x, Float.NaN);   // every element must be written
                    }
                }
                be.causalSelfAttentionForward(qkv, h, kv, scale, fused[0], fused[1]);
                be.causalSelfAttentionBackward(qkv, fused[0], dy, h, kv, scale, fused[2]);
                CompositeAttention.packedForward(be, qkv, h, kv, scale, ref[0], ref[1]);
                CompositeAttention.packedBackward(be, qkv, ref[0], dy, h, kv, scale, ref[2]);
                String where = "packed (B " + b + ", H " + h + ", Hkv " + kv + ", T " + t + ", D " + d + ", threads "
                        + threads + ")";
                compare(new String[] {"att", "y", "dqkv"}, fused, ref, be, tol, where);
                oneThread = sameBits(oneThread, fused, be, where);
            }
        }
    }

    /** The fused outputs' bits at 2 threads equal those at 1 (held from the first call, returned). */
    private static float[][] sameBits(float[][] oneThread, Tensor[] fused, CpuBackend be, String where) {
        float[][] now = new float[fused.length][];
        for (int i = 0; i < fused.length; i++) {
            now[i] = be.toHost(fused[i]);
            if (oneThread != null) {
                assertArrayEquals(oneThread[i], now[i], "output " + i + " against 1 thread, " + where);
            }
        }
        return oneThread != null ? oneThread : now;
    }

    private static void compare(String[] names, Tensor[] fused, Tensor[] ref, CpuBackend be, double tol, String where) {
        for (int i = 0; i < names.length; i++) {
            float[] f = be.toHost(fused[i]);
            float[] e = be.toHost(ref[i]);
            String what = names[i] + " " + where;
            double max = 0;
            double worst = 0;
            for (int j = 0; j < e.length; j++) {
                max = Math.max(max, Math.abs(e[j]));
                worst = Math.max(worst, Math.abs(e[j] - f[j]));   // NaN (an element left unwritten) fails
            }
            assertTrue(worst <= tol * max, what + ": worst |Δ| " + worst + " > " + tol + " · " + max);
        }
    }

    /** Fused vs composite on random inputs, |Δ| ≤ tol · max|ref|; the fused bits equal at 1 and 2 threads. */
    private static void check(int b, int h, int kv, int t, int d, double tol) {
        float[][] oneThread = null;
        for (int threads : new int[] {1, 2}) {
            Random r = new Random(31L * h + kv + t);
            try (CpuBackend be = new CpuBackend(new MemoryTracker("attn"), threads)) {
                Tensor q = gaussian(be, r, b, h, t, d);
                Tensor k = gaussian(be, r, b, kv, t, d);
                Tensor v = gaussian(be, r, b, kv, t, d);
                Tensor dy = gaussian(be, r, b, h, t, d);
                float scale = (float) (1 / Math.sqrt(d));
                Tensor[] fused = run(be, q, k, v, dy, scale, true);
                Tensor[] ref = run(be, q, k, v, dy, scale, false);
                String where = "(B " + b + ", H " + h + ", Hkv " + kv + ", T " + t + ", D " + d + ", threads " + threads
                        + ")";
                compare(new String[] {"att", "yHeads", "dq", "dk", "dv"}, fused, ref, be, tol, where);
                oneThread = sameBits(oneThread, fused, be, where);
            }
        }
    }

    /** {att, yHeads, dq, dk, dv} through the backend's fused op or the composite. */
    private static Tensor[] run(CpuBackend be, Tensor q, Tensor k, Tensor v, Tensor dy, float scale, boolean fused) {
        return run(be, q, k, v, dy, scale, fused, q.dim(0), q.dim(1), q.dim(2), q.dim(2));
    }

    /** {@link #run} with att shaped {@code attShape} (the square, or the fused op's lower triangle). */
    private static Tensor[] run(CpuBackend be, Tensor q, Tensor k, Tensor v, Tensor dy, float scale, boolean fused,
                                long... attShape) {
        Tensor att = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, attShape);
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
