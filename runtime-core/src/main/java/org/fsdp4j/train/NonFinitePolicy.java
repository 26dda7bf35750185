// What a run does when a step's loss or gradient norm is inf or NaN: stop at that step (the
// default), or skip up to maxSkippedSteps such steps (the parameters are not updated) and stop at
// the next one. Under fp16 a gradient overflow with a finite loss is not divergence: the loss
// scaler skips the step and retries at a lower scale, and the run only stops when the scale
// reaches its floor. Immutable.
package org.fsdp4j.train;

import java.util.Locale;

/**
 * @param action          stop or skip
 * @param maxSkippedSteps with skip: how many non-finite steps are skipped before the run stops (0 with stop)
 */
public record NonFinitePolicy(Action action, int maxSkippedSteps) {

    public enum Action {
        STOP, SKIP;

        public String cliName() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** Stop at the first non-finite step. */
    public static final NonFinitePolicy STOP = new NonFinitePolicy(Action.STOP, 0);

    /** How many non-finite steps --on-nonfinite skip tolerates unless told otherwise. */
    public static final int DEFAULT_MAX_SKIPPED_STEPS = 10;

    public NonFinitePolicy {
        if (action == null) {
            throw new IllegalArgumentException("--on-nonfinite must be stop or skip");
        }
        if (action == Action.STOP && maxSkippedSteps != 0) {
            throw new IllegalArgumentException("--max-skipped-steps applies to --on-nonfinite skip only");
        }
        if (action == Action.SKIP && maxSkippedSteps < 1) {
            throw new IllegalArgumentException("--max-skipped-steps must be at least 1, got " + maxSkippedSteps);
        }
    }

    /** Parses --on-nonfinite stop|skip; {@code maxSkippedSteps} null takes the default for skip. */
    public static NonFinitePolicy parse(String action, Integer maxSkippedSteps) {
        String a = action.trim().toUpperCase(Locale.ROOT);
        if (a.equals("STOP")) {
            return maxSkippedSteps == null ? STOP : new NonFinitePolicy(Action.STOP, maxSkippedSteps);
        }
        if (a.equals("SKIP")) {
            return new NonFinitePolicy(Action.SKIP, maxSkippedSteps == null ? DEFAULT_MAX_SKIPPED_STEPS : maxSkippedSteps);
        }
        throw new IllegalArgumentException("unknown --on-nonfinite '" + action + "': use stop or skip");
    }

    @Override
    public String toString() {
        return action == Action.STOP ? "stop" : "skip up to " + maxSkippedSteps;
    }
}
