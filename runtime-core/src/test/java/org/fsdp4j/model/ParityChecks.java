// Parity with PyTorch for a model family (GptParityChecks, LlamaParityChecks): the model and AdamW on
// a backend must reproduce what tools/reference computed in float64 for the same fp32 weights and
// batch — logits, loss, every parameter gradient, one AdamW step, and the losses of 10 AdamW steps —
// and, with bf16 parameters (FSDP mixed precision, so bf16 activations and gradients), the logits,
// loss and gradients PyTorch's bf16 autocast computed from the same bf16 weights. A family names its
// dumps, its tolerances (each derived in its class) and the gradients it reaches through the same
// bf16 rounding points as PyTorch; a subclass of that names the backend. The dumps are fixed (they
// are the point of comparison), so these checks' inputs are not re-drawn.
package org.fsdp4j.model;

import static org.fsdp4j.model.GradCheck.maxAbs;
import static org.fsdp4j.model.GradCheck.maxAbsErr;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.List;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.optim.AdamW;
import org.fsdp4j.optim.OptimizerState;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

@TestInstance(TestInstance.Lifecycle.PER_CLASS)   // the dump lists are the family's (instance) methods
public abstract class ParityChecks {

    /**
     * Fail when |a − b| > atol·max|ref| + rtol·|ref| (GradCheck.assertClose, per tensor). fp32: logits,
     * loss, gradients, the weights after one AdamW step, the 10 step losses (relative). bf16: a result
     * reached through PyTorch's rounding points must be within bf16UlpOfMax·max|ref| and differ in at
     * most bf16MaxDiffering of its elements; the other gradients within bf16DivergedGradFactor ×
     * PyTorch's own bf16 error (the dump's torchBf16Error).
     */
    protected record Tolerances(double logitsAtol, double logitsRtol, double lossRtol, double gradAtol,
                                double gradRtol, double stepAtol, double stepRtol, double stepLossRtol,
                                double bf16UlpOfMax, double bf16MaxDiffering, double bf16DivergedGradFactor) {
    }

    /** The backend under test, fresh for each check; may skip the check (a JUnit assumption) where it cannot run. */
    protected abstract Backend createBackend();

    /** The family's fp32 dumps (float64 results from fp32 weights), as test resources. */
    protected abstract List<String> fp32Dumps();

    /** The family's bf16 autocast dumps. */
    protected abstract List<String> bf16Dumps();

    protected abstract Tolerances tolerances();

    /**
     * The parameters whose bf16 gradients fsdp4j and PyTorch reach through the same rounding points:
     * those complete before the first point where the two backward passes round differently.
     */
    protected abstract boolean reachedThroughTheSameRoundings(String name, int numLayers);

    /** The backend, the model and its unsharded store holding the reference's initial weights, and the batch. */
    private final class Setup implements AutoCloseable {
        final ReferenceDump ref;
        final Backend backend = createBackend();
        final DecoderModel<?> model;
        final ParameterStore store;
        final Tensor tokens;    // (B, T) I32
        final Tensor targets;   // (B, T) I32

        Setup(String resource) {
            ref = ReferenceDump.load(resource);
            model = (DecoderModel<?>) ref.config().create(backend, false);
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
    @MethodSource("fp32Dumps")
    public void logitsLossAndEveryGradientMatchPyTorch(String resource) {
        Tolerances tol = tolerances();
        GradCheck gc = new GradCheck();
        try (Setup s = new Setup(resource)) {
            float loss = s.model.forward(s.tokens, s.targets, UnitHooks.NONE);
            float[] logits = s.backend.toHost(s.model.logits());
            double[] refLogits = s.ref("logits");
            gc.assertClose(resource + " logits", logits, refLogits, tol.logitsAtol(), tol.logitsRtol());
            double refLoss = s.ref.floats("loss")[0];
            assertEquals(refLoss, loss, tol.lossRtol() * refLoss, resource + " loss");
            System.out.printf("parity %s: logits max |err| %.3g = %.3g·max|ref| (PyTorch fp32: %.3g·max|ref|);"
                            + " loss %.7f vs %.7f%n", resource, maxAbsErr(logits, refLogits),
                    maxAbsErr(logits, refLogits) / maxAbs(refLogits),
                    s.ref.headerNumber("torchFp32Error", "logitsMaxAbsOverMaxAbsLogit"), loss, refLoss);

            s.model.backward(UnitHooks.NONE, 1f);
            String worst = null;
            double worstNormalized = -1;
            double worstAbs = 0;
            for (String name : s.ref.paramNames()) {
                float[] grad = s.store.grad(name);
                double[] refGrad = s.ref("grad." + name);
                gc.assertClose(resource + " grad " + name, grad, refGrad, tol.gradAtol(), tol.gradRtol());
                double err = maxAbsErr(grad, refGrad);
                worstAbs = Math.max(worstAbs, err);
                if (err / maxAbs(refGrad) > worstNormalized) {
                    worstNormalized = err / maxAbs(refGrad);
                    worst = name;
                }
            }
            System.out.printf("parity %s: %d gradients, max |err| %.3g; worst %s at %.3g·max|ref|"
                    + " (PyTorch fp32: %.3g·max|ref|)%n", resource, s.ref.paramNames().size(), worstAbs, worst,
                    worstNormalized, s.ref.headerNumber("torchFp32Error", "gradMaxAbsOverMaxAbsGrad"));
        }
    }

    @ParameterizedTest
    @MethodSource("fp32Dumps")
    public void oneAdamWStepFromTheReferenceGradientsMatchesPyTorch(String resource) {
        Tolerances tol = tolerances();
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
                gc.assertClose(resource + " weights after step 1: " + name, param, refParam, tol.stepAtol(),
                        tol.stepRtol());
                worstNormalized = Math.max(worstNormalized, maxAbsErr(param, refParam) / maxAbs(refParam));
            }
            System.out.printf("parity %s: weights after one AdamW step, max |err| %.3g·max|ref|%n", resource,
                    worstNormalized);
        }
    }

    @ParameterizedTest
    @MethodSource("fp32Dumps")
    public void tenAdamWStepLossesMatchPyTorch(String resource) {
        Tolerances tol = tolerances();
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
                if (!(rel <= tol.stepLossRtol())) {
                    fail(resource + ": loss of step " + step + " is " + loss + ", PyTorch " + ref + " (rel err " + rel
                            + " > " + tol.stepLossRtol() + ")" + log);
                }
            }
            System.out.printf("parity %s: %d AdamW step losses, max rel err %.3g (PyTorch fp32: %.3g)%s%n", resource,
                    refLosses.length, worstRel, s.ref.headerNumber("torchFp32Error", "stepLossesMaxRel"), log);
        }
    }

    @ParameterizedTest
    @MethodSource("bf16Dumps")
    public void bf16LogitsLossAndEveryGradientMatchPyTorchAutocast(String resource) {
        Tolerances tol = tolerances();
        GradCheck gc = new GradCheck();
        try (Setup s = new Setup(resource); HalfParams bf16 = new HalfParams(s.backend, s.store, DType.BF16)) {
            float loss = s.model.forward(s.tokens, s.targets, UnitHooks.NONE);
            float[] logits = s.backend.toHost(s.model.logits());
            double[] refLogits = s.ref("logits");
            double logitsDiffering = assertSameRoundings(gc, tol, resource + " bf16 logits", logits, refLogits);
            double refLoss = s.ref.floats("loss")[0];
            double lossBound = 2 * maxAbsErr(logits, refLogits) + tol.lossRtol() * Math.abs(refLoss);
            assertEquals(refLoss, loss, lossBound, resource + " bf16 loss");
            System.out.printf("parity bf16 %s on %s: logits max |err| %.3g·max|ref| (bound %.3g), %.4f of them differ"
                            + " (bound %.2f); loss %.7f vs %.7f (|err| %.3g, bound %.3g)%n", resource, s.backend.name(),
                    maxAbsErr(logits, refLogits) / maxAbs(refLogits), tol.bf16UlpOfMax(), logitsDiffering,
                    tol.bf16MaxDiffering(), loss, refLoss, Math.abs(loss - refLoss), lossBound);

            s.model.backward(UnitHooks.NONE, 1f);
            double torchError = s.ref.headerNumber("torchBf16Error", "gradMaxAbsOverMaxAbsGrad");
            double divergedAtol = tol.bf16DivergedGradFactor() * torchError;
            double sameWorst = 0;
            double sameDiffering = 0;
            double divergedWorst = 0;
            String divergedWorstName = null;
            List<String> same = new java.util.ArrayList<>();
            for (String name : s.ref.paramNames()) {
                float[] grad = bf16.grad(s.store.entry(name));
                double[] refGrad = s.ref("grad." + name);
                double normalized = maxAbsErr(grad, refGrad) / maxAbs(refGrad);
                if (reachedThroughTheSameRoundings(name, s.ref.config().numLayers())) {
                    same.add(name);
                    sameDiffering = Math.max(sameDiffering,
                            assertSameRoundings(gc, tol, resource + " bf16 grad " + name, grad, refGrad));
                    sameWorst = Math.max(sameWorst, normalized);
                } else {
                    gc.assertClose(resource + " bf16 grad " + name, grad, refGrad, divergedAtol, 0);
                    if (normalized > divergedWorst) {
                        divergedWorst = normalized;
                        divergedWorstName = name;
                    }
                }
            }
            System.out.printf("parity bf16 %s on %s: gradients of %s max |err| %.3g·max|ref| (bound %.3g), at most %.4f"
                            + " of a tensor differ (bound %.2f); the others worst %s at %.3g·max|ref| (bound %.3g ="
                            + " %.0f x PyTorch bf16's own error %.3g)%n", resource, s.backend.name(), same, sameWorst,
                    tol.bf16UlpOfMax(), sameDiffering, tol.bf16MaxDiffering(), divergedWorstName, divergedWorst,
                    divergedAtol, tol.bf16DivergedGradFactor(), torchError);
        }
    }

    /**
     * Holds a bf16 result to PyTorch's where both round at the same points: within bf16UlpOfMax of the
     * largest value, and equal but for at most bf16MaxDiffering of the elements. Returns the fraction
     * that differ.
     */
    private static double assertSameRoundings(GradCheck gc, Tolerances tol, String what, float[] actual, double[] ref) {
        int differing = 0;
        int beyond = 0;   // further than the bound: with the count of differing ones, says "one flip, amplified" from "everywhere"
        double bound = tol.bf16UlpOfMax() * maxAbs(ref);
        for (int i = 0; i < ref.length; i++) {
            if (actual[i] != ref[i]) {
                differing++;
            }
            if (Math.abs(actual[i] - ref[i]) > bound) {
                beyond++;
            }
        }
        double fraction = (double) differing / ref.length;
        gc.assertClose(String.format("%s (%d of %d elements differ from PyTorch's, %d of them beyond the bound)", what,
                differing, ref.length, beyond), actual, ref, tol.bf16UlpOfMax(), 0);
        if (!(fraction <= tol.bf16MaxDiffering())) {
            fail(String.format("%s: %d of %d elements differ from PyTorch's bf16 autocast (%.1f%%, at most %.0f%%"
                            + " may, by rare one-ulp flips): the rounding points differ, e.g. a value left in fp32 or"
                            + " rounded twice, or statistics taken in bf16; max |err| %.3g·max|ref|", what, differing,
                    ref.length, 100 * fraction, 100 * tol.bf16MaxDiffering(), maxAbsErr(actual, ref) / maxAbs(ref)));
        }
        return fraction;
    }
}
