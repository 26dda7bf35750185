// Pretrained weights for any model, as the API hands them to Fsdp.shard: safetensors files (one
// file, a directory with model.safetensors, or a Hugging Face sharded checkpoint) read through a
// name mapping from the model's parameter names to the files' tensor names. The files' headers are
// checked when opened; the mapping is checked against the model when Fsdp.shard asks (check), and
// each rank then reads only the elements its shards hold. The reading is org.fsdp4j.weights'
// (SafetensorsFile, PretrainedWeights); this class is its public face.
package org.fsdp4j.api;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Predicate;
import org.fsdp4j.weights.PretrainedWeights;
import org.fsdp4j.weights.SafetensorsFile;
import org.fsdp4j.weights.TensorRef;

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
public final class SafetensorsWeights implements ParamSource, AutoCloseable {

    private final Path location;
    private final List<SafetensorsFile> files;
    private final Function<String, String> tensorName;
    private final Predicate<String> ignorable;
    private volatile PretrainedWeights resolved;     // the mapping checked against the last model asked for

    private SafetensorsWeights(Path location, List<SafetensorsFile> files, Function<String, String> tensorName,
                               Predicate<String> ignorable) {
        this.location = location;
        this.files = files;
        this.tensorName = tensorName;
        this.ignorable = ignorable;
    }

    /**
     * Opens weights whose tensors carry the model's parameter names (as fsdp4j's Llama's carry
     * Hugging Face's).
     *
     * @param location a .safetensors file, or a directory holding model.safetensors or a sharded
     *                 checkpoint's model.safetensors.index.json and the files it names
     * @return the opened weights; close them when the model has been sharded
     * @throws IllegalArgumentException if there are no such files or one is malformed, naming it
     */
    public static SafetensorsWeights open(Path location) {
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
    public static SafetensorsWeights open(Path location, Function<String, String> tensorName,
                                          Predicate<String> ignorable) {
        if (location == null || tensorName == null || ignorable == null) {
            throw new IllegalArgumentException("weights need a location, a tensor name mapping and an ignorable test");
        }
        return new SafetensorsWeights(location, PretrainedWeights.openFiles(location), tensorName, ignorable);
    }

    /**
     * The tensors of the files, by name, with their shapes.
     *
     * @return tensor name to shape, in the files' order
     */
    public Map<String, long[]> tensors() {
        Map<String, long[]> out = new LinkedHashMap<>();
        for (SafetensorsFile f : files) {
            for (SafetensorsFile.Entry e : f.entries()) {
                out.put(e.name(), e.shape());
            }
        }
        return out;
    }

    /**
     * Checks the weights against a model's parameters: each needs a tensor of its shape in a
     * dtype fsdp4j reads, and each tensor of the files needs a parameter (or to be ignorable).
     *
     * @param params every parameter of the model
     * @throws IllegalArgumentException naming the first tensor or parameter that does not fit
     */
    @Override
    public void check(List<ParamSpec> params) {
        Map<String, TensorRef> mapping = new LinkedHashMap<>();
        for (ParamSpec p : params) {
            String tensor = tensorName.apply(p.name());
            if (tensor == null) {
                throw new IllegalArgumentException("the weight mapping has no tensor for parameter " + p.name());
            }
            mapping.put(p.name(), TensorRef.asIs(tensor));
        }
        resolved = PretrainedWeights.of(location, files, List.of(params), mapping, ignorable);
    }

    /**
     * Copies a parameter's elements from its tensor, widened to fp32.
     *
     * @throws IllegalStateException if the weights were not checked against the model first
     *                               ({@link Fsdp#shard} does that)
     */
    @Override
    public void fill(ParamSpec spec, long firstElement, float[] out, int outOffset, int count) {
        PretrainedWeights w = resolved;
        if (w == null) {
            throw new IllegalStateException("the weights at " + location + " have not been checked against a model:"
                    + " give them to FsdpOptions.Builder.initialValues, or call check first");
        }
        w.fill(spec, firstElement, out, outOffset, count);
    }

    /** Closes the files; idempotent. */
    @Override
    public void close() {
        files.forEach(SafetensorsFile::close);
    }

    @Override
    public String toString() {
        return "safetensors weights at " + location;
    }
}
