// The step of every run: the model (a GPT or a Llama) sharded through the public API (Fsdp.shard), N ranks each
// training on its 1/N of the global batch with its shard of the parameters, gradients and
// optimizer state. One rank is the same engine at N = 1 (its shard is the whole model, reduced
// by nothing), so there is one step path; the tests keep their own unsharded reference. Same
// batches, same initial parameters (ParamInit, or the --init-from weights, sliced per shard) and the same AdamW at every N,
// so the losses agree up to rounding. Nothing here reaches past the API into the engine.
package org.fsdp4j.train;

import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.Fsdp;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ModelFactory;
import org.fsdp4j.api.Processes;
import org.fsdp4j.api.ShardedModel;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.api.ShardingInfo;
import org.fsdp4j.api.StateSource;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.model.DecoderModel;
import org.fsdp4j.weights.PretrainedWeights;

public final class EngineStepExecutor implements StepExecutor {

    private final ShardedModel model;
    private final Processes processes;     // null when every rank runs in this process
    private final ProcessGroup group;      // the same run, as the engine holds it

    /** Starts config.fsdp().worldSize() ranks in this process, as the config asks. */
    public EngineStepExecutor(TrainConfig config) {
        this(config, null);
    }

    /**
     * As above, but when {@code processes} is given this process runs only its share of the
     * ranks (N / processes), which reach the others over TCP; the ranks of every process on this
     * machine share its cores.
     */
    public EngineStepExecutor(TrainConfig config, ProcessGroup processes) {
        this.group = processes;
        this.processes = processes == null ? null : Processes.of(processes);
        ModelFactory factory = config.model().factory();
        // pretrained weights are opened (and checked against the model) here, on the caller's thread, so a
        // file that does not fit is refused before any rank starts; the ranks read them while they shard
        try (PretrainedWeights weights = config.initFrom().map(p -> config.model().openWeights(p)).orElse(null)) {
            FsdpOptions options = config.fsdp().toBuilder().initialValues(weights).build();
            this.model = this.processes == null ? Fsdp.shard(factory, options)
                    : Fsdp.shard(factory, options, this.processes);
        }
    }

    @Override
    public StepMetrics step(Batch batch, int step, float lr) {
        return model.step(batch, lr);
    }

    @Override
    public float evaluate(Batch batch) {
        return model.evaluate(batch);
    }

    @Override
    public long parameterCount() {
        return model.info().parameterCount();
    }

    @Override
    public long paddedParameterCount() {
        return model.info().paddedParameterCount();
    }

    @Override
    public int worldSize() {
        return model.info().worldSize();
    }

    @Override
    public String backendName() {
        return model.info().backendName();
    }

    /** The dense GEMM peak of one rank's device for the dtype the model computes in (the param dtype). */
    @Override
    public OptionalDouble peakTflopsPerRank() {
        return model.info().peakTflopsPerRank();
    }

    @Override
    public List<MemoryTracker> memoryTrackers() {
        return model.deviceMemory();
    }

    @Override
    public List<MemoryTracker> hostMemoryTrackers() {
        return model.hostMemory();
    }

    @Override
    public Optional<ShardingInfo.GatherSchedule> gatherSchedule() {
        return model.info().gatherSchedule();
    }

    @Override
    public Optional<ProcessGroup> processGroup() {
        return Optional.ofNullable(group);
    }

    @Override
    public ShardedStateDict shardedState() {
        return model.shardedStateDict();
    }

    @Override
    public void loadState(StateSource source, ShardedStateDict.Progress progress) {
        model.loadShardedStateDict(source, progress);
    }

    /** The sharded model (for tests). */
    public ShardedModel model() {
        return model;
    }

    @Override
    public void close() {
        model.close();
    }
}
