// One optimizer step on one global batch over the run's ranks: zero the gradients, forward,
// backward, global gradient norm, clipping, optimizer update. The Trainer around it owns the
// data, the schedule, timing and reporting. EngineStepExecutor (the FSDP engine) is the one
// implementation in main; the interface is the seam for tests, whose scripted executors
// (DivergenceTest, MultiProcessTrainerTest) drive the Trainer through losses, non-finite
// gradients and failures on demand. The defaults are what such a double need not say.
package org.fsdp4j.train;

import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.api.ShardingInfo;
import org.fsdp4j.api.StateSource;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.StepMetrics;

public interface StepExecutor extends AutoCloseable {

    /**
     * Runs step {@code step} (counting from 1) on {@code batch} at learning rate {@code lr} and
     * returns when the parameters are updated.
     */
    StepMetrics step(Batch batch, int step, float lr);

    /**
     * The mean loss over {@code batch} (a global batch of the held-out split), forward only: no
     * gradient, no update, the optimizer and the loss scale as they were. Collective, as a step is.
     */
    float evaluate(Batch batch);

    /** Parameters of the model (unpadded, unsharded). */
    long parameterCount();

    /** Number of ranks taking part. */
    int worldSize();

    /** Parameters plus the sharded layout's alignment and padding (P′); the parameter count unsharded. */
    default long paddedParameterCount() {
        return parameterCount();
    }

    /** The backend of rank 0, in words, for the run header. */
    String backendName();

    /** One tracker per rank, in rank order. */
    List<MemoryTracker> memoryTrackers();

    /** Where offloaded state lives: one host tracker per rank, or none when nothing is offloaded. */
    default List<MemoryTracker> hostMemoryTrackers() {
        return List.of();
    }

    /**
     * The dense GEMM peak of one rank's device for the dtype the model computes in (TFLOP/s),
     * for MFU; empty where the backend does not know it (the CPU).
     */
    default OptionalDouble peakTflopsPerRank() {
        return OptionalDouble.empty();
    }

    /** How gathered parameters and unsharded gradients are scheduled; empty when nothing is gathered. */
    default Optional<ShardingInfo.GatherSchedule> gatherSchedule() {
        return Optional.empty();
    }

    /** Whether the ranks gather in place (in-process fp32 ranks reading shared masters): no gathered buffers. */
    default boolean gathersInPlace() {
        return gatherSchedule().map(ShardingInfo.GatherSchedule::inPlace).orElse(false);
    }

    /** Whether this run's processes decide together when to stop (a run over several processes). */
    default boolean agreesOnStops() {
        return processGroup().isPresent();
    }

    /**
     * The run's processes when this executor runs one process's share of the ranks (they vote on
     * stops at each step's end and pool their figures: Trainer, JobFigures); empty in one process.
     */
    default Optional<org.fsdp4j.dist.ProcessGroup> processGroup() {
        return Optional.empty();
    }

    /** Every rank's training state copied to the host (for a checkpoint; between steps). */
    default ShardedStateDict shardedState() {
        throw new IllegalStateException(getClass().getSimpleName() + " keeps no state a checkpoint can save");
    }

    /**
     * Loads every rank's shards from {@code source} (by parameter name and element range, so any
     * saved world size or strategy loads) and continues the optimizer and the loss scaler from {@code progress}.
     */
    default void loadState(StateSource source, ShardedStateDict.Progress progress) {
        throw new IllegalStateException(getClass().getSimpleName() + " cannot load a checkpoint");
    }

    @Override
    void close();
}
