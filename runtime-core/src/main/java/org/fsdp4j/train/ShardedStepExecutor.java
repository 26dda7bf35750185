// The step on N in-process FSDP ranks (LocalFsdpGroup): each rank trains on its 1/N of the
// global batch with its shard of the parameters, gradients and optimizer state. Same batches,
// same initial parameters (ParamInit, sliced per shard) and same AdamW as the single-rank
// executor, so the losses agree up to fp32 rounding.
package org.fsdp4j.train;

import java.util.List;
import java.util.function.UnaryOperator;
import org.fsdp4j.data.Batch;
import org.fsdp4j.fsdp.FsdpStepResult;
import org.fsdp4j.fsdp.LocalFsdpGroup;
import org.fsdp4j.model.GptModel;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryTracker;

public final class ShardedStepExecutor implements StepExecutor {

    private final TrainConfig config;
    private final LocalFsdpGroup group;
    private final long[] commBytesPerRank;

    /** Starts config.worldSize() ranks; each gets cpuThreads / N host threads (all cores when cpuThreads is 0). */
    public ShardedStepExecutor(TrainConfig config, Device device) {
        if (!device.isCpu()) {
            throw new IllegalArgumentException("sharded training runs its ranks in-process on the CPU backend; "
                    + device + " needs the NCCL communicator, which this build does not have: use --device cpu");
        }
        this.config = config;
        int n = config.worldSize();
        int threadsPerRank = config.cpuThreads() == 0 ? LocalFsdpGroup.defaultCpuThreads(n)
                : Math.max(1, config.cpuThreads() / n);
        this.group = new LocalFsdpGroup(config.fsdp(),
                (rank, backend) -> new GptModel(config.model(), backend, config.checkpointActivations()),
                LocalStepExecutor.optimizerFor(config), config.seed(), config.batchSize(), config.seqLen(),
                threadsPerRank, UnaryOperator.identity());
        this.commBytesPerRank = new long[n];
    }

    @Override
    public StepOutcome step(Batch batch, int step, float lr) {
        List<FsdpStepResult> results = group.step(batch.tokens(), batch.targets(), lr);
        for (int r = 0; r < results.size(); r++) {
            commBytesPerRank[r] = results.get(r).commBytes().sentBytes();
        }
        FsdpStepResult r0 = results.get(0);
        return new StepOutcome(r0.loss(), r0.gradNorm(), r0.skipped());
    }

    @Override
    public long parameterCount() {
        return config.model().parameterCount();
    }

    @Override
    public long paddedParameterCount() {
        return group.paddedParams();
    }

    @Override
    public int worldSize() {
        return config.worldSize();
    }

    @Override
    public String backendName() {
        return group.backendName() + " per rank";
    }

    @Override
    public List<MemoryTracker> memoryTrackers() {
        return group.deviceMemory();
    }

    @Override
    public List<MemoryTracker> hostMemoryTrackers() {
        return config.offload() ? group.hostMemory() : List.of();
    }

    @Override
    public java.util.Optional<org.fsdp4j.fsdp.UnitBufferPlan> unitBufferPlan() {
        return java.util.Optional.of(group.plan());
    }

    @Override
    public long[] commBytesPerRank() {
        return commBytesPerRank.clone();
    }

    @Override
    public void close() {
        group.close();
    }
}
