// The public API of fsdp4j: everything a user's program needs to shard and train a model. The
// other packages of runtime-core (the engine, the backends, the trainer) are internal.
/**
 * fsdp4j's public API: shard a model over ranks and train it with Fully Sharded Data Parallel
 * (ZeRO-3 and its relatives), from Java.
 *
 * <h2>The entry point</h2>
 *
 * {@link org.fsdp4j.api.Fsdp#shard(ModelFactory, FsdpOptions) Fsdp.shard(factory, options)}
 * starts {@link org.fsdp4j.api.FsdpOptions#worldSize() worldSize} ranks in this process, builds
 * the model on each with the {@link org.fsdp4j.api.ModelFactory}, and shards its parameters,
 * gradients and AdamW state as the {@link org.fsdp4j.api.FsdpOptions} say (strategy, hybrid
 * mesh, mixed precision, prefetch, micro-batches, activation checkpointing, offload, clipping,
 * loss scaling, device). It returns a {@link org.fsdp4j.api.ShardedModel}: one
 * {@link org.fsdp4j.api.ShardedModel#step(Batch) step} per global {@link org.fsdp4j.api.Batch},
 * the weights out and back in (whole with {@code stateDict}/{@code loadStateDict}, or as the
 * ranks hold them with {@code shardedStateDict}/{@code loadShardedStateDict}, loadable at another
 * world size), and each rank's measured memory. A run over several processes passes a
 * {@link org.fsdp4j.api.Processes} as well.
 *
 * <pre>{@code
 * import org.fsdp4j.api.*;
 *
 * float[] x = new float[64 * 32];                  // 64 samples of 32 features
 * int[] y = new int[64];                           // their classes, 0..9
 * ModelFactory mlp = ctx -> SequentialModel.builder(ctx, "x", "y")
 *         .unit("hidden", Layers.linear(32, 128), Layers.gelu())
 *         .unit("out", Layers.linear(128, 10))
 *         .build();
 * FsdpOptions options = FsdpOptions.builder().worldSize(2).build();
 * try (ShardedModel model = Fsdp.shard(mlp, options)) {
 *     for (int step = 0; step < 10; step++) {
 *         StepMetrics m = model.step(Batch.of(Batch.floats("x", x, 64, 32), Batch.ints("y", y, 64)));
 *         System.out.println("step " + step + " loss " + m.loss());
 *     }
 * }
 * }</pre>
 *
 * <h2>The model contract</h2>
 *
 * A model is either built from {@link org.fsdp4j.api.Layers} in a
 * {@link org.fsdp4j.api.SequentialModel} (fsdp4j runs its backward), or implements
 * {@link org.fsdp4j.api.TrainableModel} itself:
 * <ul>
 *   <li>its parameters are declared, never allocated: {@link org.fsdp4j.api.ParamSpec}s (name,
 *       shape, initialiser, weight decay) grouped into {@link org.fsdp4j.api.Unit}s, FSDP's unit
 *       of gathering (typically the root and one unit per block);</li>
 *   <li>its forward reads one micro-batch's {@link org.fsdp4j.api.Inputs} (the batch's fields by
 *       name, on the device) and writes the mean loss into a one-element F32 tensor; its backward
 *       accumulates into the units' bound gradients;</li>
 *   <li>both compute only with the {@link org.fsdp4j.api.Ops} of its
 *       {@link org.fsdp4j.api.ModelContext} ({@link org.fsdp4j.api.Linear},
 *       {@link org.fsdp4j.api.LayerNorm} and {@link org.fsdp4j.api.CrossEntropyLoss} package the
 *       common layers), and call the {@link org.fsdp4j.api.UnitHooks} around each unit, where the
 *       runtime gathers, frees and reduces.</li>
 * </ul>
 *
 * <h2>Threads and ownership</h2>
 *
 * A {@link org.fsdp4j.api.ShardedModel} is called from one thread at a time; each rank runs its
 * model on its own thread. A tensor belongs to whoever allocated it with
 * {@link org.fsdp4j.api.Ops#allocate}; the tensors the runtime hands a model (inputs, bound
 * parameters and gradients, the loss) are the runtime's, and the model never closes them.
 *
 * <h2>Running</h2>
 *
 * The CPU backend's element-wise loops use the JDK's Vector API, an incubator module in Java 17:
 * start every JVM that runs fsdp4j with {@code --add-modules jdk.incubator.vector} (without it,
 * opening the CPU backend fails with one sentence naming the flag). GPUs need the cuda-kernels and nccl-comm modules on
 * the class path as well.
 */
package org.fsdp4j.api;
