// Causal self-attention: forward against fp64, backward (input and all four parameters)
// against central differences of the fp64 forward. T > 1 and H > 1 so masking, the head split
// and the strided-batched GEMMs are all exercised.
package org.fsdp4j.model;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class CausalSelfAttentionTest {

    @Test
    void backwardMatchesFiniteDifferences() {
        GradCheck gc = new GradCheck();
        int b = 2, t = 5, c = 8, heads = 2, n = b * t;
        float[] x = gc.uniform(n * c, 1);
        float[] qkvW = gc.uniform(3 * c * c, 0.5);
        float[] qkvB = gc.uniform(3 * c, 0.3);
        float[] projW = gc.uniform(c * c, 0.5);
        float[] projB = gc.uniform(c, 0.3);
        float[] dout = gc.uniform(n * c, 1);
        CausalSelfAttention attn = new CausalSelfAttention(c, heads);
        try (Backend be = GradCheck.cpuBackend();
             Tensor xT = GradCheck.upload(be, x, b, t, c);
             Tensor qkvWT = GradCheck.upload(be, qkvW, 3 * c, c);
             Tensor qkvBT = GradCheck.upload(be, qkvB, 3 * c);
             Tensor projWT = GradCheck.upload(be, projW, c, c);
             Tensor projBT = GradCheck.upload(be, projB, c);
             Tensor out = GradCheck.zeros(be, b, t, c);
             Tensor doutT = GradCheck.upload(be, dout, b, t, c);
             Tensor dx = GradCheck.zeros(be, b, t, c);
             Tensor dqkvW = GradCheck.zeros(be, 3 * c, c);
             Tensor dqkvB = GradCheck.zeros(be, 3 * c);
             Tensor dprojW = GradCheck.zeros(be, c, c);
             Tensor dprojB = GradCheck.zeros(be, c)) {
            try (CausalSelfAttention.Saved saved = attn.forward(be, xT, qkvWT, qkvBT, projWT, projBT, out)) {
                attn.backward(be, saved, xT, doutT, dx, qkvWT, projWT, dqkvW, dqkvB, dprojW, dprojB);
            }
            double[] xd = GradCheck.widen(x), qw = GradCheck.widen(qkvW), qb = GradCheck.widen(qkvB);
            double[] pw = GradCheck.widen(projW), pb = GradCheck.widen(projB), r = GradCheck.widen(dout);
            gc.assertForward("attention forward", be.toHost(out),
                    RefOps.attention(xd, b, t, c, heads, qw, qb, pw, pb));
            gc.assertGradient("attention dinp", be.toHost(dx), GradCheck.finiteDifference(xd,
                    v -> RefOps.dot(r, RefOps.attention(v, b, t, c, heads, qw, qb, pw, pb))));
            gc.assertGradient("attention dqkv.weight", be.toHost(dqkvW), GradCheck.finiteDifference(qw,
                    v -> RefOps.dot(r, RefOps.attention(xd, b, t, c, heads, v, qb, pw, pb))));
            gc.assertGradient("attention dqkv.bias", be.toHost(dqkvB), GradCheck.finiteDifference(qb,
                    v -> RefOps.dot(r, RefOps.attention(xd, b, t, c, heads, qw, v, pw, pb))));
            gc.assertGradient("attention dproj.weight", be.toHost(dprojW), GradCheck.finiteDifference(pw,
                    v -> RefOps.dot(r, RefOps.attention(xd, b, t, c, heads, qw, qb, v, pb))));
            gc.assertGradient("attention dproj.bias", be.toHost(dprojB), GradCheck.finiteDifference(pb,
                    v -> RefOps.dot(r, RefOps.attention(xd, b, t, c, heads, qw, qb, pw, v))));
        }
    }
}
