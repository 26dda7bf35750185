// The model computes in its parameters' dtype, as FSDP's mixed precision needs: with bf16 or fp16
// copies of the parameters bound (and gradients in the same dtype), activations and gradients are
// computed in that dtype, and the loss and gradients match the fp32 run within the half format's
// precision. fp16 is covered here only; the bf16 rounding points are held to PyTorch's autocast by
// GptParityChecks (ParityChecks).
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class HalfPrecisionParamsTest {

    // Unit roundoff u: bf16 keeps 8 significant bits, u = 2^-8; fp16 11, u = 2^-11. Against the fp32 run
    // (exact to ~1e-6 here), the half run's error is that of its roundings: the parameters (16 tensors on
    // the way from the tokens to the loss), every activation (27 rounding points forward: the embedding;
    // per block ln1, qkv, scores, probabilities, heads, projection, residual, ln2, fc, GELU, projection,
    // residual; lnf, logits), about as many backward, and the gradient buffer: D ≈ 70 independent errors,
    // each at most u and RMS u/√3 relative to the value it rounds, reaching a gradient with gain ~1
    // relative to its scale (LayerNorm renormalises). They add in quadrature: RMS √(D/3)·u ≈ 4.8u, and a
    // tensor's worst element lies within ~4 RMS, so GRAD_ULPS = 20u·max|ref|. Measured, 40 seeds each:
    // worst 10.5u for both (4.1e-2 bf16, 5.2e-3 fp16): the error scales with u as this says. The loss
    // averages B·T = 32 rows whose errors are each ≤ 2·max|Δlogit| (Σ_v |softmax − one-hot| ≤ 2), so it
    // gets LOSS_ULPS = 2u relative; measured ≤ 0.19u. Bugs in the half path (a wrong conversion, a lost
    // accumulation, an overflow) are O(1).
    private static final double GRAD_ULPS = 20;
    private static final double LOSS_ULPS = 2;

    private static double unitRoundoff(DType dtype) {
        return dtype == DType.BF16 ? 0x1p-8 : 0x1p-11;
    }

    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"BF16", "F16"})
    void halfParametersMatchFp32(DType dtype) {
        GradCheck gc = new GradCheck();
        GptConfig cfg = new GptConfig(29, 16, 2, 2, 16);
        int b = 2, t = 16;
        try (Backend be = GradCheck.cpuBackend();
             GptModel model = new GptModel(cfg, be, false);
             ParameterStore store = new ParameterStore(be, model.units());
             Tensor tok = GradCheck.upload(be, gc.tokens(b * t, cfg.vocabSize()), b, t);
             Tensor tgt = GradCheck.upload(be, gc.tokens(b * t, cfg.vocabSize()), b, t)) {
            gc.randomParams(store);
            float lossFp32 = model.forward(tok, tgt, UnitHooks.NONE);
            model.backward(UnitHooks.NONE, 1f);

            try (HalfParams half = new HalfParams(be, store, dtype)) {
                float lossHalf = model.forward(tok, tgt, UnitHooks.NONE);
                model.backward(UnitHooks.NONE, 1f);
                double u = unitRoundoff(dtype);
                assertEquals(lossFp32, lossHalf, LOSS_ULPS * u * lossFp32, dtype + " loss (seed " + gc.seed + ")");
                double worst = 0;
                String worstName = null;
                for (ParameterStore.Entry e : store.entries()) {
                    float[] grad = half.grad(e);
                    double[] ref = GradCheck.widen(store.grad(e.spec().name()));
                    gc.assertClose(dtype + " d" + e.spec().name(), grad, ref, GRAD_ULPS * u, 0);
                    double normalized = GradCheck.maxAbsErr(grad, ref) / GradCheck.maxAbs(ref);
                    if (normalized > worst) {
                        worst = normalized;
                        worstName = e.spec().name();
                    }
                }
                System.out.printf("%s vs fp32: loss rel err %.2fu (bound %.0fu), gradients worst d%s at"
                                + " %.1fu·max|ref| (bound %.0fu), u = %.3g; seed %d%n", dtype,
                        Math.abs(lossHalf - lossFp32) / lossFp32 / u, LOSS_ULPS, worstName, worst / u, GRAD_ULPS, u,
                        gc.seed);
            }
        }
    }
}
