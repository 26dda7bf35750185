// The model is dtype-agnostic in its parameters and gradients, as FSDP's mixed precision needs:
// with bf16 or fp16 copies of the parameters bound (and gradients in the same dtype), loss and
// gradients match the fp32 run within the half format's precision. Activations stay fp32.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.fsdp4j.backend.Backend;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Tensor;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class HalfPrecisionParamsTest {

    // bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 2e-3), fp16 11 bits (2^-12 ≈ 2.4e-4).
    // Parameters are rounded once and gradients at every accumulation (wte gets ~B·T + 1 of them),
    // so errors of several roundings are expected: measured up to 6e-3 (bf16) and 1.2e-3 (fp16) of
    // each tensor's largest gradient. The bounds leave a 4-5× margin.
    private static double tolerance(DType dtype) {
        return dtype == DType.BF16 ? 3e-2 : 5e-3;
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
            for (ParameterStore.Entry e : store.entries()) {
                int numel = (int) e.spec().numel();
                float[] v = e.spec().init() == ParamSpec.Init.ONES ? gc.around(numel, 1, 0.3) : gc.uniform(numel, 0.3);
                store.set(e.spec().name(), v);
            }
            float lossFp32 = model.forward(tok, tgt, UnitHooks.NONE);
            model.backward(UnitHooks.NONE, 1f);

            try (HalfParams half = new HalfParams(be, store, dtype)) {
                float lossHalf = model.forward(tok, tgt, UnitHooks.NONE);
                model.backward(UnitHooks.NONE, 1f);
                assertEquals(lossFp32, lossHalf, tolerance(dtype) * lossFp32, dtype + " loss (seed " + gc.seed + ")");
                for (ParameterStore.Entry e : store.entries()) {
                    gc.assertClose(dtype + " d" + e.spec().name(), half.grad(e),
                            GradCheck.widen(store.grad(e.spec().name())), tolerance(dtype), 0);
                }
            }
        }
    }
}
