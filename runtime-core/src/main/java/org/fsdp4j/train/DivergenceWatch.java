// Watches each step's loss and gradient norm and decides, under the run's NonFinitePolicy,
// whether the run goes on. It relies only on what every StepExecutor reports (loss, gradient
// norm, skipped): a step whose gradients are not finite is never applied to the parameters, so
// a skipped step leaves them as they were. Under fp16 a skipped step with a finite loss is the
// loss scaler at work (the gradients overflowed, the scale is lowered), not divergence.
package org.fsdp4j.train;

import java.util.Optional;
import org.fsdp4j.api.StepMetrics;

final class DivergenceWatch {

    /** Why a run diverged; the names are what summary.json says. */
    enum Kind {
        /** The loss itself is inf or NaN: the forward pass overflowed, no loss scale can help. */
        NONFINITE_LOSS("nonfinite_loss"),
        /** The loss is finite but the gradients are not (fp32/bf16). */
        NONFINITE_GRADIENTS("nonfinite_gradients"),
        /** fp16: the gradients overflowed at every loss scale down to the scaler's floor. */
        LOSS_SCALE_FLOOR("loss_scale_floor");

        private final String jsonName;

        Kind(String jsonName) {
            this.jsonName = jsonName;
        }

        String jsonName() {
            return jsonName;
        }
    }

    /** The step the run stopped at and why. */
    record Divergence(int step, Kind kind) {
    }

    private final NonFinitePolicy policy;
    private final boolean lossScaled;
    private int skippedSteps;        // every step whose update was not applied
    private int nonFiniteSkips;      // those the policy skipped (not fp16 overflows the scaler handles)
    private Divergence divergence;

    DivergenceWatch(NonFinitePolicy policy, boolean lossScaled) {
        this.policy = policy;
        this.lossScaled = lossScaled;
    }

    /** Records step {@code step}'s outcome; returns true when the run must stop after it. */
    boolean observe(int step, StepMetrics outcome) {
        boolean finiteLoss = Float.isFinite(outcome.loss());
        boolean finiteGrads = Double.isFinite(outcome.gradNorm());
        if (outcome.skipped() || !finiteGrads) {
            skippedSteps++;
        }
        if (finiteLoss && (finiteGrads || lossScaled)) {
            return false;
        }
        Kind kind = finiteLoss ? Kind.NONFINITE_GRADIENTS : Kind.NONFINITE_LOSS;
        if (policy.action() == NonFinitePolicy.Action.SKIP && nonFiniteSkips < policy.maxSkippedSteps()) {
            nonFiniteSkips++;
            return false;
        }
        divergence = new Divergence(step, kind);
        return true;
    }

    /** fp16: step {@code step} found the gradients non-finite at the loss scaler's floor. */
    void lossScaleFloor(int step) {
        skippedSteps++;
        divergence = new Divergence(step, Kind.LOSS_SCALE_FLOOR);
    }

    int skippedSteps() {
        return skippedSteps;
    }

    Optional<Divergence> divergence() {
        return Optional.ofNullable(divergence);
    }
}
