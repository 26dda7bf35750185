// Parity with PyTorch (issues 2 and 4): the GPT and AdamW on a backend must reproduce what
// tools/reference/gpt_reference.py computed in float64 for the same fp32 weights and batch —
// logits, loss, every parameter gradient, one AdamW step, and the losses of 10 AdamW steps —
// and, with the parameters and gradients bound as bf16 (FSDP mixed precision), the logits, loss
// and gradients within bf16's tolerance. Two dumps: nanoGPT's init, and large weights where the
// nonlinearities, biases and gains matter. A subclass names the backend (GptParityTest: the CPU;
// cuda-kernels' CudaGptParityTest: a GPU, through runtime-core's test-jar). The dumps are fixed
// (they are the point of comparison), so these checks' inputs are not re-drawn.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.TreeSet;
import java.util.stream.Collectors;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.optim.AdamW;
import org.fsdp4j.optim.OptimizerState;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Tensor;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

public abstract class GptParityChecks {

    // Tolerances: fail when |a − b| > atol·max|ref| + rtol·|ref| (GradCheck.assertClose, per tensor).
    // The reference is float64. PyTorch's own fp32 run lands within 4.3e-7·max|ref| of it on the logits
    // and 1.0e-6·max|ref| on the gradients (headers' torchFp32Error, worst of the two dumps). The bugs
    // of tools/reference/bug_sensitivity.py move the large-weights dump's logits/gradients by at least
    // 5e-5/1.1e-4·max|ref| (GELU cubic 0.0446 for 0.044715), more for exact GELU (2e-4/8e-4), an
    // attention scale off by 0.1% (9e-4/1.4e-3) or LayerNorm eps 1e-6 (1e-4/1.4e-4).
    // Logits: ~10x PyTorch's fp32 error, 10x below the smallest bug above.
    static final double LOGITS_ATOL = 5e-6;
    static final double LOGITS_RTOL = 1e-6;
    // Loss: the mean of B·T = 64 fp32 losses of ~5, a few ulps (4.8e-7 each) of the value.
    static final double LOSS_RTOL = 1e-6;
    // Gradients: 20x PyTorch's fp32 error (sums that cancel, e.g. LayerNorm gains), 5x below the smallest bug.
    static final double GRAD_ATOL = 2e-5;
    static final double GRAD_RTOL = 1e-6;
    // One AdamW step from the reference gradients: elementwise, so only the rounding of fp32 weights
    // is left (ulp of 1.0 is 1.2e-7); decay on biases and gains moves the weights by 1e-4·max|ref|, eps 1e-6
    // for 1e-8 by 6e-4, L2 instead of decoupled decay by 3e-3.
    static final double STEP_ATOL = 1e-6;
    static final double STEP_RTOL = 1e-6;
    // Required by issue 2; PyTorch's fp32 run stays within 2e-7 of the float64 losses, while beta2 0.999
    // for 0.95 moves them by 8e-4, decay on every parameter by 9e-5, eps 1e-6 for 1e-8 by 1.3e-5.
    static final double STEP_LOSS_RTOL = 1e-5;

    // bf16 parameters and gradients (activations fp32). RNE rounding moves each value by at most
    // u = 2^-9 relative (bf16 keeps 8 significant bits, spacing 2^-8 at 1). Each rounded parameter
    // tensor on the way from the tokens to a logit perturbs it by about u of its own contribution:
    // wte, wpe, then per block ln1, attention in and out, ln2, MLP in and out (6 weight/gain roundings),
    // then lnf and the tied head, D = 6L + 4 = 16 for the dumps' L = 2. Worst case, the perturbations
    // add up: |Δlogit| ≤ D·u·max|logit| = 3.1e-2·max|ref|. A gradient is a product of the same
    // factors run backwards plus one more rounding when it is accumulated into its bf16 buffer, so
    // (D + 1)·u = 3.3e-2·max|ref|. Loss: |∂loss/∂logit| summed over a row is ≤ 2 (softmax − one-hot)
    // and the loss averages rows, so |Δloss| ≤ 2·max|Δlogit|.
    static final int BF16_DEPTH = 16;
    static final double BF16_UNIT_ROUNDOFF = 0x1p-9;
    static final double BF16_LOGITS_ATOL = BF16_DEPTH * BF16_UNIT_ROUNDOFF;
    static final double BF16_GRAD_ATOL = (BF16_DEPTH + 1) * BF16_UNIT_ROUNDOFF;

    /** The backend under test, fresh for each check; may skip the check (a JUnit assumption) where it cannot run. */
    protected abstract Backend createBackend();

    /** The backend, the model and its unsharded store holding the reference's initial weights, and the batch. */
    private final class Setup implements AutoCloseable {
        final GptReference ref;
        final Backend backend = createBackend();
        final GptModel model;
        final ParameterStore store;
        final Tensor tokens;    // (B, T) I32
        final Tensor targets;   // (B, T) I32

        Setup(String resource) {
            ref = GptReference.load(resource);
            model = new GptModel(ref.config(), backend, false);
            store = new ParameterStore(backend, model.units());
            assertEquals(new TreeSet<>(ref.paramNames()),
                    store.entries().stream().map(e -> e.spec().name()).collect(Collectors.toCollection(TreeSet::new)),
                    "the model's parameter names differ from the reference's");
            for (String name : ref.paramNames()) {
                assertArrayEquals(ref.shape("param." + name), store.entry(name).spec().shape(), "shape of " + name);
                store.set(name, ref.floats("param." + name));
            }
            store.zeroGrads();
            tokens = GradCheck.upload(backend, ref.ints("tokens"), ref.batchSize(), ref.seqLen());
            targets = GradCheck.upload(backend, ref.ints("targets"), ref.batchSize(), ref.seqLen());
        }

        AdamW adamW() {
            return new AdamW((float) ref.adamw("lr"), (float) ref.adamw("beta1"), (float) ref.adamw("beta2"),
                    (float) ref.adamw("eps"), (float) ref.adamw("weightDecay"));
        }

        double[] ref(String name) {
            return GradCheck.widen(ref.floats(name));
        }

        @Override
        public void close() {
            Buffers.close(tokens, targets, store, model, backend);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"/reference/gpt_tiny.bin", "/reference/gpt_tiny_large.bin"})
    public void logitsLossAndEveryGradientMatchPyTorch(String resource) {
        GradCheck gc = new GradCheck();
        try (Setup s = new Setup(resource)) {
            float loss = s.model.forward(s.tokens, s.targets, UnitHooks.NONE);
            float[] logits = s.backend.toHost(s.model.logits());
            double[] refLogits = s.ref("logits");
            gc.assertClose(resource + " logits", logits, refLogits, LOGITS_ATOL, LOGITS_RTOL);
            double refLoss = s.ref.floats("loss")[0];
            assertEquals(refLoss, loss, LOSS_RTOL * refLoss, resource + " loss");
            System.out.printf("parity %s: logits max |err| %.3g = %.3g·max|ref| (PyTorch fp32: %.3g·max|ref|);"
                            + " loss %.7f vs %.7f%n", resource, maxAbsErr(logits, refLogits),
                    maxAbsErr(logits, refLogits) / maxAbs(refLogits),
                    s.ref.torchFp32Error("logitsMaxAbsOverMaxAbsLogit"), loss, refLoss);

            s.model.backward(UnitHooks.NONE, 1f);
            String worst = null;
            double worstNormalized = -1;
            double worstAbs = 0;
            for (String name : s.ref.paramNames()) {
                float[] grad = s.store.grad(name);
                double[] refGrad = s.ref("grad." + name);
                gc.assertClose(resource + " grad " + name, grad, refGrad, GRAD_ATOL, GRAD_RTOL);
                double err = maxAbsErr(grad, refGrad);
                worstAbs = Math.max(worstAbs, err);
                if (err / maxAbs(refGrad) > worstNormalized) {
                    worstNormalized = err / maxAbs(refGrad);
                    worst = name;
                }
            }
            System.out.printf("parity %s: %d gradients, max |err| %.3g; worst %s at %.3g·max|ref|"
                    + " (PyTorch fp32: %.3g·max|ref|)%n", resource, s.ref.paramNames().size(), worstAbs, worst,
                    worstNormalized, s.ref.torchFp32Error("gradMaxAbsOverMaxAbsGrad"));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"/reference/gpt_tiny.bin", "/reference/gpt_tiny_large.bin"})
    public void oneAdamWStepFromTheReferenceGradientsMatchesPyTorch(String resource) {
        GradCheck gc = new GradCheck();
        try (Setup s = new Setup(resource);
             OptimizerState state = new OptimizerState(s.backend, s.store.optimizerTargets(), s.adamW())) {
            for (String name : s.ref.paramNames()) {
                s.backend.copyFromHost(s.ref.floats("grad." + name), 0, s.store.entry(name).grad());
            }
            s.adamW().step(s.backend, state.segments(), 1, 1f);
            double worstNormalized = 0;
            for (String name : s.ref.paramNames()) {
                float[] param = s.store.get(name);
                double[] refParam = s.ref("step1." + name);
                gc.assertClose(resource + " weights after step 1: " + name, param, refParam, STEP_ATOL, STEP_RTOL);
                worstNormalized = Math.max(worstNormalized, maxAbsErr(param, refParam) / maxAbs(refParam));
            }
            System.out.printf("parity %s: weights after one AdamW step, max |err| %.3g·max|ref|%n", resource,
                    worstNormalized);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"/reference/gpt_tiny.bin", "/reference/gpt_tiny_large.bin"})
    public void tenAdamWStepLossesMatchPyTorch(String resource) {
        try (Setup s = new Setup(resource);
             OptimizerState state = new OptimizerState(s.backend, s.store.optimizerTargets(), s.adamW())) {
            float[] refLosses = s.ref.floats("stepLosses");
            AdamW adamW = s.adamW();
            double worstRel = 0;
            StringBuilder log = new StringBuilder();
            for (int step = 1; step <= refLosses.length; step++) {
                s.store.zeroGrads();
                float loss = s.model.forward(s.tokens, s.targets, UnitHooks.NONE);
                s.model.backward(UnitHooks.NONE, 1f);
                adamW.step(s.backend, state.segments(), step, 1f);
                double ref = refLosses[step - 1];
                double rel = Math.abs(loss - ref) / Math.abs(ref);
                worstRel = Math.max(worstRel, rel);
                log.append(String.format("%n  step %2d loss %.7f PyTorch %.7f rel err %.2g", step, loss, ref, rel));
                if (!(rel <= STEP_LOSS_RTOL)) {
                    fail(resource + ": loss of step " + step + " is " + loss + ", PyTorch " + ref + " (rel err " + rel
                            + " > " + STEP_LOSS_RTOL + ")" + log);
                }
            }
            System.out.printf("parity %s: %d AdamW step losses, max rel err %.3g (PyTorch fp32: %.3g)%s%n", resource,
                    refLosses.length, worstRel, s.ref.torchFp32Error("stepLossesMaxRel"), log);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"/reference/gpt_tiny.bin", "/reference/gpt_tiny_large.bin"})
    public void bf16ParamsLogitsLossAndGradientsMatchPyTorchWithinBf16Tolerance(String resource) {
        GradCheck gc = new GradCheck();
        try (Setup s = new Setup(resource); HalfParams bf16 = new HalfParams(s.backend, s.store, DType.BF16)) {
            float loss = s.model.forward(s.tokens, s.targets, UnitHooks.NONE);
            float[] logits = s.backend.toHost(s.model.logits());
            double[] refLogits = s.ref("logits");
            gc.assertClose(resource + " bf16 logits", logits, refLogits, BF16_LOGITS_ATOL, 0);
            double refLoss = s.ref.floats("loss")[0];
            double logitsErr = maxAbsErr(logits, refLogits);
            assertEquals(refLoss, loss, 2 * BF16_LOGITS_ATOL * maxAbs(refLogits), resource + " bf16 loss");

            s.model.backward(UnitHooks.NONE, 1f);
            double worstNormalized = 0;
            String worst = null;
            for (String name : s.ref.paramNames()) {
                float[] grad = bf16.grad(s.store.entry(name));
                double[] refGrad = s.ref("grad." + name);
                gc.assertClose(resource + " bf16 grad " + name, grad, refGrad, BF16_GRAD_ATOL, 0);
                double normalized = maxAbsErr(grad, refGrad) / maxAbs(refGrad);
                if (normalized > worstNormalized) {
                    worstNormalized = normalized;
                    worst = name;
                }
            }
            System.out.printf("parity bf16 %s on %s: logits max |err| %.3g·max|ref| (bound %.3g); loss %.6f vs %.6f"
                            + " (|err| %.3g, bound %.3g); gradients worst %s at %.3g·max|ref| (bound %.3g)%n", resource,
                    s.backend.name(), logitsErr / maxAbs(refLogits), BF16_LOGITS_ATOL, loss, refLoss,
                    Math.abs(loss - refLoss), 2 * BF16_LOGITS_ATOL * maxAbs(refLogits), worst, worstNormalized,
                    BF16_GRAD_ATOL);
        }
    }

    private static double maxAbsErr(float[] actual, double[] ref) {
        double m = 0;
        for (int i = 0; i < ref.length; i++) {
            m = Math.max(m, Math.abs(actual[i] - ref[i]));
        }
        return m;
    }

    private static double maxAbs(double[] x) {
        double m = 0;
        for (double v : x) {
            m = Math.max(m, Math.abs(v));
        }
        return m;
    }
}
