// Pretrained weights in safetensors files behind the API's SafetensorsWeights: the files' headers
// are checked when opened; the mapping from the model's parameter names to the files' tensor
// names is checked against the model when Fsdp.shard asks (check); each rank then reads only the
// elements its shards hold (PretrainedWeights).
package org.fsdp4j.weights;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Predicate;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.SafetensorsWeights;

public final class SafetensorsSource implements SafetensorsWeights {

    private final Path location;
    private final List<SafetensorsFile> files;
    private final Function<String, String> tensorName;
    private final Predicate<String> ignorable;
    private volatile PretrainedWeights resolved;     // the mapping checked against the last model asked for

    private SafetensorsSource(Path location, List<SafetensorsFile> files, Function<String, String> tensorName,
                               Predicate<String> ignorable) {
        this.location = location;
        this.files = files;
        this.tensorName = tensorName;
        this.ignorable = ignorable;
    }

    /** Opens the files at {@code location} (SafetensorsWeights.open documents the arguments). */
    public static SafetensorsSource open(Path location, Function<String, String> tensorName, Predicate<String> ignorable) {
        if (location == null || tensorName == null || ignorable == null) {
            throw new IllegalArgumentException("weights need a location, a tensor name mapping and an ignorable test");
        }
        return new SafetensorsSource(location, PretrainedWeights.openFiles(location), tensorName, ignorable);
    }

    @Override
    public Map<String, long[]> tensors() {
        Map<String, long[]> out = new LinkedHashMap<>();
        for (SafetensorsFile f : files) {
            for (SafetensorsFile.Entry e : f.entries()) {
                out.put(e.name(), e.shape());
            }
        }
        return out;
    }

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

    @Override
    public void fill(ParamSpec spec, long firstElement, float[] out, int outOffset, int count) {
        PretrainedWeights w = resolved;
        if (w == null) {
            throw new IllegalStateException("the weights at " + location + " have not been checked against a model:"
                    + " give them to FsdpOptions.Builder.initialValues, or call check first");
        }
        w.fill(spec, firstElement, out, outOffset, count);
    }

    @Override
    public void close() {
        files.forEach(SafetensorsFile::close);
    }

    @Override
    public String toString() {
        return "safetensors weights at " + location;
    }
}
