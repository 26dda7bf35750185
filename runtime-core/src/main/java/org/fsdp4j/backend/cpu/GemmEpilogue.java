// What a PanelGemm product does with a row block of C once the block's k-sums are complete, for
// the CPU backend's fused Linear ops: the block is still in the thread's float[] (PanelGemm's C
// block), so a bias, a GELU or the GELU's gradient costs a pass over cache instead of a pointwise
// op's passes over memory. Each computes what the unfused ops compute, with
// the same bits:
//   BIAS           C = product + bias                       (Ops.gemmThenAddBias)
//   BIAS_GELU      C = product + bias, out = GELU(C)        (Ops.gemmThenAddBiasGelu)
//   GELU_GRADIENT  C = GELU'(pre) ⊙ product                 (Ops.gemmThenGeluBackward)
// A product with an epilogue has α = 1 and β = 0. The second tensor (out, or pre) has C's layout:
// its element for C's element at index x of C's buffer is at x + delta of its own buffer.
package org.fsdp4j.backend.cpu;

import java.nio.FloatBuffer;
import java.util.Arrays;

record GemmEpilogue(Kind kind, float[] bias, FloatBuffer other, long delta) {

    enum Kind { BIAS, BIAS_GELU, GELU_GRADIENT }

    /** Scratch slots past PanelGemm's 0–3: a row of the second tensor, of the result, of exp's values. */
    private static final int SECOND = 4;
    private static final int RESULT = 5;
    private static final int EXP = 6;

    /** C = product + bias (n). */
    static GemmEpilogue bias(float[] bias) {
        return new GemmEpilogue(Kind.BIAS, bias, null, 0);
    }

    /** C = product + bias, and out = GELU(C) at C's index + delta of {@code out}. */
    static GemmEpilogue biasGelu(float[] bias, FloatBuffer out, long delta) {
        return new GemmEpilogue(Kind.BIAS_GELU, bias, out, delta);
    }

    /** C = GELU'(pre) ⊙ product, pre at C's index + delta of {@code pre}. */
    static GemmEpilogue geluGradient(FloatBuffer pre, long delta) {
        return new GemmEpilogue(Kind.GELU_GRADIENT, null, pre, delta);
    }

    /** Whether this epilogue fits a product with n columns (a bias has one element per column). */
    boolean fits(int n) {
        return bias == null || bias.length == n;
    }

    /**
     * Writes a finished row block: cs rows [0, mb) with row stride nbp hold the product's columns
     * [col, col + nb) of C; they go to C at c[at ..] with row stride ldc. Row by row, so that a
     * row's passes (the GELU's three, its gradient's three) stay in L1: a whole block is 0.6 MB at
     * n = 1536, past a Zen 4 core's L2.
     */
    void finish(float[] cs, int nbp, int mb, int nb, FloatBuffer c, long at, int ldc, int col) {
        float[] e = kind == Kind.BIAS ? null : Scratch.floats(EXP, nb);
        for (int i = 0; i < mb; i++) {
            int row = i * nbp;
            long to = at + (long) i * ldc;
            if (bias != null) {
                Simd.addAt(cs, row, bias, col, nb);
            }
            switch (kind) {
                case BIAS -> c.put((int) to, cs, row, nb);
                case BIAS_GELU -> {
                    c.put((int) to, cs, row, nb);
                    Gelu.forwardInPlace(cs, row, nb, e);
                    other.put((int) (to + delta), cs, row, nb);
                }
                case GELU_GRADIENT -> {
                    float[] pre = Scratch.floats(SECOND, nb);
                    float[] d = Scratch.floats(RESULT, nb);
                    other.get((int) (to + delta), pre, 0, nb);
                    Arrays.fill(d, 0, nb, 0f);    // +0 + GELU'·product: the bits of geluBackward into a zeroed dpre
                    Gelu.backward(d, 0, pre, 0, cs, row, nb, e);
                    c.put((int) to, d, 0, nb);
                }
                default -> throw new IllegalStateException("unknown epilogue " + kind);
            }
        }
    }
}
