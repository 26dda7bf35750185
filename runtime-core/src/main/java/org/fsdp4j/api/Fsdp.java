// The library's entry point, FSDP2's fully_shard and DeepSpeed's initialize in one call: a model
// recipe and options in, a sharded model that trains out.
package org.fsdp4j.api;

/**
 * Shards a model over ranks and returns it ready to train.
 *
 * <pre>{@code
 * FsdpOptions options = FsdpOptions.builder().worldSize(2).build();
 * try (ShardedModel model = Fsdp.shard(ctx -> new MyModel(ctx), options)) {
 *     StepMetrics m = model.step(batch);
 * }
 * }</pre>
 */
public final class Fsdp {

    private Fsdp() {
    }

    /**
     * Starts {@code options.worldSize()} ranks in this process, builds the model on each with
     * {@code factory}, and shards its parameters, gradients and optimizer state as the options say.
     * Every rank initialises the elements it holds from the parameters' specs with the options'
     * seed, so the initial model is the same at every world size.
     *
     * @param factory builds one rank's model
     * @param options how to shard and train
     * @return the sharded model; close it when done
     * @throws IllegalArgumentException if an option is invalid or the device is not usable, naming
     *                                  the option and what to change
     */
    public static ShardedModel shard(ModelFactory factory, FsdpOptions options) {
        return FsdpRuntime.get().shard(factory, options, null);
    }

    /**
     * As {@link #shard(ModelFactory, FsdpOptions)}, for one process of a run over several: this
     * process runs its share of the {@code options.worldSize()} ranks (ranks
     * {@code [i·N/P, (i+1)·N/P)} for process i of P), which reach the others' over TCP on the CPU and
     * over NCCL on GPUs (each process's ranks on the GPUs of its place on the node). Every
     * process calls it with the same options, and steps on the same global batches.
     *
     * @param factory   builds one rank's model
     * @param options   how to shard and train (the same in every process)
     * @param processes this process's membership in the run
     * @return this process's share of the sharded model; close it when done
     * @throws IllegalArgumentException if an option is invalid, or the world size does not split over the processes
     */
    public static ShardedModel shard(ModelFactory factory, FsdpOptions options, Processes processes) {
        if (processes == null) {
            throw new IllegalArgumentException("processes is null: use shard(factory, options) for a run in one process");
        }
        return FsdpRuntime.get().shard(factory, options, processes);
    }
}
