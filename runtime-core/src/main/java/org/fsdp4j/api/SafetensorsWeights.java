// Pretrained weights for any model, as the API hands them to Fsdp.shard: safetensors files (one
// file, a directory with model.safetensors, or a Hugging Face sharded checkpoint) read through a
// name mapping from the model's parameter names to the files' tensor names. The reading is the
// engine's (org.fsdp4j.weights, through FsdpRuntime); this is its public face.
package org.fsdp4j.api;

import java.nio.file.Path;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * Pretrained weights in safetensors files, as the values a sharded model starts from:
 *
 * <pre>{@code
 * try (SafetensorsWeights weights = SafetensorsWeights.open(Path.of("model.safetensors"))) {
 *     FsdpOptions options = FsdpOptions.builder().worldSize(4).initialValues(weights).build();
 *     try (ShardedModel model = Fsdp.shard(factory, options)) {
 *         ...
 *     }
 * }
 * }</pre>
 *
 * <p>{@link Fsdp#shard} first {@link #check checks} that the files hold a tensor of the right
 * shape for every parameter of the model, and no tensor the model does not take (unless the
 * mapping declares it ignorable); then each rank reads only the elements of its shards, so the
 * same files load at any world size. F32, F16 and BF16 tensors are read (widened to fp32); every
 * refusal is an {@link IllegalArgumentException} whose one-line message names the file and the
 * tensor. Tensors are read as the parameters lay them out (row-major, the same shape).
 */
public interface SafetensorsWeights extends ParamSource, AutoCloseable {

    /**
     * Opens weights whose tensors carry the model's parameter names (as fsdp4j's Llama's carry
     * Hugging Face's).
     *
     * @param location a .safetensors file, or a directory holding model.safetensors or a sharded
     *                 checkpoint's model.safetensors.index.json and the files it names
     * @return the opened weights; close them when the model has been sharded
     * @throws IllegalArgumentException if there are no such files or one is malformed, naming it
     */
    static SafetensorsWeights open(Path location) {
        return open(location, Function.identity(), tensor -> false);
    }

    /**
     * Opens weights whose tensor names differ from the model's parameter names.
     *
     * @param location   a .safetensors file, or a directory holding model.safetensors or a sharded
     *                   checkpoint's model.safetensors.index.json and the files it names
     * @param tensorName the tensor holding each parameter, by the parameter's name
     * @param ignorable  the tensors the files may hold that no parameter takes (buffers the model
     *                   recomputes, e.g. rotary inverse frequencies); any other unused tensor is refused
     * @return the opened weights; close them when the model has been sharded
     * @throws IllegalArgumentException if there are no such files or one is malformed, naming it
     */
    static SafetensorsWeights open(Path location, Function<String, String> tensorName, Predicate<String> ignorable) {
        return FsdpRuntime.get().openSafetensors(location, tensorName, ignorable);
    }

    /**
     * The tensors of the files, by name, with their shapes.
     *
     * @return tensor name to shape, in the files' order
     */
    Map<String, long[]> tensors();

    /**
     * Checks the weights against a model's parameters: each needs a tensor of its shape in a
     * dtype fsdp4j reads, and each tensor of the files needs a parameter (or to be ignorable).
     *
     * @param params every parameter of the model
     * @throws IllegalArgumentException naming the first tensor or parameter that does not fit
     */
    @Override
    void check(java.util.List<ParamSpec> params);

    /**
     * Copies a parameter's elements from its tensor, widened to fp32.
     *
     * @throws IllegalStateException if the weights were not checked against the model first
     *                               ({@link Fsdp#shard} does that)
     */
    @Override
    void fill(ParamSpec spec, long firstElement, float[] out, int outOffset, int count);

    /** Closes the files; idempotent. */
    @Override
    void close();
}
