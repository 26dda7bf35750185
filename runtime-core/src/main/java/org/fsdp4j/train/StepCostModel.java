// What a run's steps will cost, predicted before anything is allocated: the preflight asks it
// whether a run fits. AnalyticStepCost is the model today; the planner (issue 11) will be
// another implementation, and nothing else has to change.
package org.fsdp4j.train;

public interface StepCostModel {

    /** The predicted cost of one training step of {@code config} (its first step included). */
    StepCost estimate(TrainConfig config);
}
