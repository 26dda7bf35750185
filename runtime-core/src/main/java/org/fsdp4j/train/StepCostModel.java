// What a run's steps will cost, predicted before anything is allocated: the preflight asks it
// whether a run fits. The planner (org.fsdp4j.plan.Planner) is the model (PLANNER): the same
// memory model `fsdp4j plan` prints and each run checks after its first step. The seam lets the
// preflight's tests give fixed costs.
package org.fsdp4j.train;

import org.fsdp4j.plan.Planner;
import org.fsdp4j.plan.StepCost;

public interface StepCostModel {

    /** The planner's estimate of the run as TrainConfig.planInput() describes it. */
    StepCostModel PLANNER = (config, onGpu) -> new Planner().estimate(config.planInput(), onGpu);

    /**
     * The predicted cost of one training step of {@code config} (its first step included) on a GPU
     * ({@code onGpu}) or the CPU: their backends keep different workspaces (the CPU widens half
     * weights for OpenBLAS; cuBLAS pads half GEMMs off its grid).
     */
    StepCost estimate(TrainConfig config, boolean onGpu);

    /** As above, on the CPU. */
    default StepCost estimate(TrainConfig config) {
        return estimate(config, false);
    }
}
