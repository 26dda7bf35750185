// How a run ended, as summary.json records it next to the numbers (the keys are written at
// the summary's top level): how many steps were asked for, how many were skipped, and whether
// the run was interrupted, diverged or failed. A summary whose losses hold null (a non-finite
// loss) or that has fewer steps than planned says why here.
package org.fsdp4j.train;

import com.fasterxml.jackson.annotation.JsonInclude;

/**
 * @param plannedSteps   steps the run was asked for (steps says how many ran)
 * @param skippedSteps   steps whose update was not applied: fp16 overflows and non-finite steps under --on-nonfinite skip
 * @param interrupted    the run was stopped by a signal (or a stop request) before its planned steps
 * @param interruptedBy  what stopped it ("SIGINT", "SIGTERM"); absent unless interrupted
 * @param divergedAtStep the step whose loss or gradients were not finite and ended the run; absent unless it diverged
 * @param divergence     nonfinite_loss, nonfinite_gradients or loss_scale_floor; absent unless it diverged
 * @param failure        what ended the run with an error during a step ("step 12: ..."); absent unless one did
 */
public record RunOutcome(int plannedSteps, int skippedSteps, boolean interrupted,
                         @JsonInclude(JsonInclude.Include.NON_NULL) String interruptedBy,
                         @JsonInclude(JsonInclude.Include.NON_NULL) Integer divergedAtStep,
                         @JsonInclude(JsonInclude.Include.NON_NULL) String divergence,
                         @JsonInclude(JsonInclude.Include.NON_NULL) String failure) {

    /** Whether the run stopped at a non-finite step. */
    public boolean diverged() {
        return divergedAtStep != null;
    }
}
