// What Fsdp.shard returns: the handle a training loop holds. A step on a global batch; the
// weights in and out, whole or as the ranks hold them; the memory each rank uses. Every call
// is made from one thread; the ranks run on their own.
package org.fsdp4j.api;

import java.util.List;
import java.util.Map;

/**
 * A model sharded over its ranks, ready to train. Made by {@link Fsdp#shard}; close it to free
 * every rank's memory.
 *
 * <pre>{@code
 * try (ShardedModel model = Fsdp.shard(ctx -> new MyModel(ctx), options)) {
 *     for (int step = 0; step < 100; step++) {
 *         StepMetrics m = model.step(nextBatch());
 *         System.out.println(step + " " + m.loss());
 *     }
 *     Map<String, float[]> weights = model.stateDict();
 * }
 * }</pre>
 *
 * <p>Methods are called from one thread at a time; a failure of any rank fails the call with an
 * exception naming the rank, and the model should then be closed.
 */
public interface ShardedModel extends AutoCloseable {

    /**
     * One optimizer step on a global batch at the options' learning rate.
     *
     * @param batch the global batch; its sample count must split over the ranks and micro-batches
     * @return what the step measured
     */
    default StepMetrics step(Batch batch) {
        return step(batch, info().options().lr());
    }

    /**
     * One optimizer step on a global batch: every rank's forward and backward on its samples,
     * gradients reduced over the ranks, clipped, and each rank's AdamW update of its shard. Returns
     * when the loss and the gradient norm are known (the update may still be running on the device).
     *
     * @param batch the global batch; its sample count must split over the ranks and micro-batches
     * @param lr    the learning rate of this step (a schedule's value)
     * @return what the step measured
     * @throws IllegalArgumentException if the batch does not split, or the model does not find its inputs
     */
    StepMetrics step(Batch batch, float lr);

    /**
     * The mean loss over a global batch, forward only: every rank runs the forward on its samples
     * (gathering each unit's parameters for it and freeing them after), and the ranks' losses are
     * averaged with one all-reduce (every rank holds as many tokens, so this is the mean per
     * token). No gradient is computed or allocated, the optimizer and the loss scale are
     * untouched and the parameters stay bit for bit as they were; the activations the forward
     * saved are freed before it returns. On the same batch it is the loss {@link #step(Batch, float)}
     * would report before its update. How a training loop measures a held-out split.
     *
     * @param batch the global batch; its sample count must split over the ranks and micro-batches
     * @return the mean loss over the batch (every rank, every micro-batch)
     * @throws IllegalArgumentException if the batch does not split, or the model does not find its inputs
     */
    float evaluate(Batch batch);

    /**
     * The whole fp32 parameters, gathered on the host: every parameter by name, row-major, in
     * model order (the masters the optimizer updates, not the compute-dtype copies).
     *
     * @return parameter name to values
     * @throws IllegalArgumentException if this process does not hold every shard (a run over several processes)
     */
    Map<String, float[]> stateDict();

    /**
     * Replaces every parameter with these values, each rank keeping its shard, and starts the
     * optimizer afresh (moments zero, step count zero): how a run fine-tunes pretrained weights.
     *
     * @param params parameter name to values, row-major; every parameter of the model and nothing else
     * @throws IllegalArgumentException naming the parameter, if one is missing, unknown or of another size
     */
    void loadStateDict(Map<String, float[]> params);

    /**
     * The training state as this process's ranks hold it, copied to the host: each rank's shard
     * of the masters and of AdamW's moments, and the optimizer's progress. Waits for the last
     * step's update.
     *
     * @return the shards
     */
    ShardedStateDict shardedStateDict();

    /**
     * Loads a state saved by {@link #shardedStateDict()}, at this or any other world size or strategy.
     *
     * @param state the saved state
     */
    default void loadShardedStateDict(ShardedStateDict state) {
        loadShardedStateDict(state, state.progress());
    }

    /**
     * Loads every rank's shards from {@code source} by parameter name and element range (so a
     * state saved at any world size or strategy loads) and continues the optimizer from {@code progress}.
     *
     * @param source   the saved values (a ShardedStateDict, a checkpoint)
     * @param progress the optimizer's step count and loss scale to continue from
     */
    void loadShardedStateDict(StateSource source, ShardedStateDict.Progress progress);

    /**
     * What was built: devices, ranks, parameter counts, the gather schedule.
     *
     * @return the description
     */
    ShardingInfo info();

    /**
     * Each of this process's ranks' device memory, by category, live and peak, in rank order.
     *
     * @return one tracker per rank
     */
    List<MemoryTracker> deviceMemory();

    /**
     * Where offloaded state lives: each rank's host tracker, or an empty list without offload.
     *
     * @return one tracker per rank, or none
     */
    List<MemoryTracker> hostMemory();

    /** Frees every rank's memory, streams and communicators. Idempotent. */
    @Override
    void close();
}
