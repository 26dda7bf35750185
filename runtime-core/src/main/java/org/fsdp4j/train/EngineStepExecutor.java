// The step of every run: N in-process FSDP ranks (LocalFsdpGroup), each training on its 1/N of
// the global batch with its shard of the parameters, gradients and optimizer state. One rank is
// the same engine at N = 1 (its shard is the whole model, reduced by nothing), so there is one
// step path; the tests keep their own unsharded reference. Same batches, same initial parameters
// (ParamInit, sliced per shard) and the same AdamW at every N, so the losses agree up to
// rounding.
package org.fsdp4j.train;

import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.function.UnaryOperator;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.data.Batch;
import org.fsdp4j.fsdp.FsdpStepResult;
import org.fsdp4j.fsdp.LocalFsdpGroup;
import org.fsdp4j.fsdp.UnitBufferPlan;
import org.fsdp4j.optim.AdamW;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryTracker;

public final class EngineStepExecutor implements StepExecutor {

    /** Adam's betas and eps: GPT-2/nanoGPT's. */
    private static final float BETA1 = 0.9f;
    private static final float BETA2 = 0.95f;
    private static final float EPS = 1e-8f;

    private final TrainConfig config;
    private final LocalFsdpGroup group;
    private final long[] commBytesPerRank;

    /** Starts config.worldSize() ranks on {@code device}; each gets cpuThreads / N host threads (all cores when 0). */
    public EngineStepExecutor(TrainConfig config, Device device) {
        this.config = config;
        int n = config.worldSize();
        int threadsPerRank = config.cpuThreads() == 0 ? LocalFsdpGroup.defaultCpuThreads(n)
                : Math.max(1, config.cpuThreads() / n);
        this.group = new LocalFsdpGroup(config.fsdp(),
                (rank, backend) -> config.model().create(backend, config.checkpointActivations()),
                optimizerFor(config), config.seed(), config.batchSize(), config.seqLen(),
                RankPlacement.place(config.device(), device, n), new BackendOptions(threadsPerRank, config.debugStreams()),
                UnaryOperator.identity());
        this.commBytesPerRank = new long[n];
    }

    /** The AdamW every run trains with (the lr is replaced per step by the schedule's). */
    public static AdamW optimizerFor(TrainConfig config) {
        return new AdamW(config.lr(), BETA1, BETA2, EPS, config.weightDecay());
    }

    @Override
    public StepOutcome step(Batch batch, int step, float lr) {
        List<FsdpStepResult> results = group.step(batch.tokens(), batch.targets(), lr);
        long hostSyncs = 0;
        long promoted = 0;
        for (int r = 0; r < results.size(); r++) {
            commBytesPerRank[r] = results.get(r).commBytes().sentBytes();
            hostSyncs = Math.max(hostSyncs, results.get(r).hostSyncs());
            promoted += results.get(r).promotedCopies();
        }
        FsdpStepResult r0 = results.get(0);
        return new StepOutcome(r0.loss(), r0.gradNorm(), r0.skipped(), hostSyncs, promoted);
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
        return group.backendName() + (config.worldSize() > 1 ? " per rank" : "");
    }

    /** The dense GEMM peak of one rank's device for the dtype the model computes in (the param dtype). */
    @Override
    public OptionalDouble peakTflopsPerRank() {
        return group.peakTflops(config.precision().paramDtype());
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
    public Optional<UnitBufferPlan> unitBufferPlan() {
        return config.sharded() ? Optional.of(group.plan()) : Optional.empty();
    }

    @Override
    public long[] commBytesPerRank() {
        return commBytesPerRank.clone();
    }

    /** The group of ranks (for tests that inspect shards). */
    public LocalFsdpGroup group() {
        return group;
    }

    @Override
    public void close() {
        group.close();
    }
}
