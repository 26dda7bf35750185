// What the planner is asked about: a model shape, the batch, the machines and how the run shards
// and computes. The same record describes a real run (TrainConfig.planInput(): N ranks on one
// node, no GPU spec) and a hypothetical one (the plan command: N GPUs over M nodes of a known GPU).
package org.fsdp4j.plan;

import java.util.Optional;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.model.ModelConfig;

/**
 * @param model                 the model's shape (a GPT's or a Llama's)
 * @param globalBatch           sequences per optimizer step, all GPUs together (B)
 * @param seqLen                tokens per sequence (T)
 * @param gpusPerNode           GPUs (ranks) per node
 * @param nodes                 nodes
 * @param strategy              what is sharded
 * @param shardGroupSize        S for hybrid_shard; 0 otherwise
 * @param precision             param and reduce dtypes (masters, gradient shards and Adam state are fp32)
 * @param checkpointActivations recompute each block's activations in backward
 * @param offload               master, gradient shard and optimizer state on the host
 * @param prefetch              units all-gathered ahead
 * @param microBatches          forward/backward passes per step
 * @param gpu                   the GPU, for times and the fit; empty for a CPU run
 */
public record PlanInput(ModelConfig model, int globalBatch, int seqLen, int gpusPerNode, int nodes,
                        ShardingStrategy strategy, int shardGroupSize, MixedPrecisionPolicy precision,
                        boolean checkpointActivations, boolean offload, int prefetch, int microBatches,
                        @com.fasterxml.jackson.annotation.JsonIgnore Optional<GpuSpec> gpu) {

    public PlanInput {
        if (gpusPerNode < 1 || nodes < 1) {
            throw new IllegalArgumentException("--gpus and --nodes must be at least 1, got " + gpusPerNode + " and " + nodes);
        }
        if ((long) gpusPerNode * nodes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("--gpus " + gpusPerNode + " × --nodes " + nodes + " is "
                    + (long) gpusPerNode * nodes + " GPUs; at most " + Integer.MAX_VALUE + " are supported");
        }
        if (seqLen < 1 || seqLen > model.maxSeqLen()) {
            throw new IllegalArgumentException("--seq-len must be between 1 and the model's context " + model.maxSeqLen()
                    + ", got " + seqLen);
        }
        // the engine's own validation of every sharding flag (the fields are not assigned yet)
        fsdpOf(gpusPerNode * nodes, strategy, shardGroupSize, precision, prefetch, microBatches, offload)
                .checkBatch(globalBatch);
    }

    private static FsdpOptions fsdpOf(int n, ShardingStrategy strategy, int shardGroupSize, MixedPrecisionPolicy precision,
                                      int prefetch, int microBatches, boolean offload) {
        return FsdpOptions.builder().worldSize(n).strategy(strategy).shardGroupSize(shardGroupSize).precision(precision)
                .prefetch(prefetch).microBatches(microBatches).offload(offload).build();
    }

    /** The GPU for JSON (absent for a CPU run). */
    @com.fasterxml.jackson.annotation.JsonProperty("gpu")
    @com.fasterxml.jackson.annotation.JsonInclude(com.fasterxml.jackson.annotation.JsonInclude.Include.NON_NULL)
    public GpuSpec gpuSpec() {
        return gpu.orElse(null);
    }

    /** N: every GPU of every node. */
    public int worldSize() {
        return gpusPerNode * nodes;
    }

    /** The engine's configuration for this run (validates the strategy, S and the batch split). */
    public FsdpOptions fsdp() {
        return fsdpOf(worldSize(), strategy, shardGroupSize, precision, prefetch, microBatches, offload);
    }

    /** Sequences one forward processes on one GPU: B / N / M. */
    public int microBatchSize() {
        return globalBatch / worldSize() / microBatches;
    }

    public PlanInput withStrategy(ShardingStrategy s, int shardGroup) {
        return new PlanInput(model, globalBatch, seqLen, gpusPerNode, nodes, s, shardGroup, precision,
                checkpointActivations, offload, prefetch, microBatches, gpu);
    }

    public PlanInput withCheckpointActivations(boolean on) {
        return new PlanInput(model, globalBatch, seqLen, gpusPerNode, nodes, strategy, shardGroupSize, precision, on,
                offload, prefetch, microBatches, gpu);
    }

    public PlanInput withOffload(boolean on) {
        return new PlanInput(model, globalBatch, seqLen, gpusPerNode, nodes, strategy, shardGroupSize, precision,
                checkpointActivations, on, prefetch, microBatches, gpu);
    }
}
