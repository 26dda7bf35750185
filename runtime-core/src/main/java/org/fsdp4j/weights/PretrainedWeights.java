// Pretrained weights as a ParamSource: a model's parameters, each read from a tensor of one or more
// safetensors files by a name mapping (fsdp4j's parameter name → TensorRef). The engine asks for the
// element ranges each rank's shards hold (ShardedUnit), so the weights are resharded on load at any
// world size and no rank reads more than its share (the tests' unsharded ParameterStore asks for
// whole parameters). Everything is checked when the weights are opened, against the model's parameter
// specs, so a run fails before its first step, with one line naming the tensor: a parameter with
// no tensor, a tensor of another shape or of a dtype fsdp4j does not read, a tensor holding NaN or
// an infinity (read once more for this), and a tensor of the
// files that no parameter takes (a model configured smaller than its checkpoint) unless the family
// declares it ignorable (buffers a checkpoint carries that fsdp4j recomputes: Llama's
// rotary_emb.inv_freq, GPT-2's attn.bias masks).
//
// A family plugs in with its mapping and its ignorable tensors, from its own package (model's
// LlamaWeights; Gpt2Weights, with TensorRef.transposed for GPT-2's Conv1D weights): this package
// reads safetensors and knows no family. The files: one .safetensors file, or a directory holding
// model.safetensors, or a Hugging Face sharded checkpoint (model.safetensors.index.json and the files its weight_map names).
package org.fsdp4j.weights;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.function.Predicate;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.ParamSpec;

public final class PretrainedWeights implements ParamSource, AutoCloseable {

    static final String SINGLE_FILE = "model.safetensors";
    static final String SHARDED_INDEX = "model.safetensors.index.json";

    /** A parameter's tensor, resolved: the file it is in and its entry there. */
    private record Source(SafetensorsFile file, SafetensorsFile.Entry entry, TensorRef.Layout layout) {
    }

    private final List<SafetensorsFile> files;
    private final Map<String, Source> sources;   // by fsdp4j parameter name

    private PretrainedWeights(List<SafetensorsFile> files, Map<String, Source> sources) {
        this.files = files;
        this.sources = sources;
    }

    /**
     * Opens the weights at {@code location} (a file or a directory, see the file comment) for a model
     * whose units hold {@code specs}, reading parameter p from {@code mapping.get(p.name())}; checks
     * every parameter's tensor, and that the files hold no tensor the mapping does not use unless
     * {@code ignorable} accepts its name.
     */
    public static PretrainedWeights open(Path location, List<List<ParamSpec>> specs, Map<String, TensorRef> mapping,
                                         Predicate<String> ignorable) {
        return open(location, specs, tensors -> mapping, ignorable);
    }

    /**
     * As above, with the mapping chosen from the names of the tensors the files hold (a family whose
     * checkpoints name their tensors in more than one way: GPT-2's with or without "transformer.").
     */
    public static PretrainedWeights open(Path location, List<List<ParamSpec>> specs,
                                         Function<Set<String>, Map<String, TensorRef>> mappingFor,
                                         Predicate<String> ignorable) {
        List<SafetensorsFile> files = openFiles(location);
        try {
            Set<String> names = new LinkedHashSet<>();
            for (SafetensorsFile f : files) {
                for (SafetensorsFile.Entry e : f.entries()) {
                    names.add(e.name());
                }
            }
            return of(location, files, specs, mappingFor.apply(Collections.unmodifiableSet(names)), ignorable);
        } catch (RuntimeException e) {
            files.forEach(SafetensorsFile::close);
            throw e;
        }
    }

    /**
     * As {@link #open}, on {@code files} already opened from {@code location} (see openFiles); the
     * weights close them when closed, but a refusal leaves them open for their opener.
     */
    public static PretrainedWeights of(Path location, List<SafetensorsFile> files, List<List<ParamSpec>> specs,
                                       Map<String, TensorRef> mapping, Predicate<String> ignorable) {
        Map<String, SafetensorsFile> fileOf = new LinkedHashMap<>();
        for (SafetensorsFile f : files) {
            for (SafetensorsFile.Entry e : f.entries()) {
                SafetensorsFile other = fileOf.put(e.name(), f);
                if (other != null) {
                    throw new IllegalArgumentException("tensor " + e.name() + " is in both " + other.path()
                            + " and " + f.path());
                }
            }
        }
        Map<String, Source> sources = new LinkedHashMap<>();
        TreeSet<String> used = new TreeSet<>();
        for (List<ParamSpec> unit : specs) {
            for (ParamSpec p : unit) {
                TensorRef ref = mapping.get(p.name());
                if (ref == null) {
                    throw new IllegalArgumentException("the weight mapping has no tensor for parameter " + p.name());
                }
                SafetensorsFile f = fileOf.get(ref.tensor());
                if (f == null) {
                    throw new IllegalArgumentException(location + " has no tensor " + ref.tensor()
                            + " (for parameter " + p.name() + ")");
                }
                SafetensorsFile.Entry e = f.entry(ref.tensor());
                f.requireReadable(e);
                long[] want = ref.layout() == TensorRef.Layout.TRANSPOSED ? transposed(p) : p.shape();
                if (!Arrays.equals(e.shape(), want)) {
                    throw new IllegalArgumentException(f.path() + ": tensor " + ref.tensor() + " has shape "
                            + Arrays.toString(e.shape()) + ", the model's " + p.name() + " needs "
                            + Arrays.toString(want) + (ref.layout() == TensorRef.Layout.TRANSPOSED ? " (stored transposed)" : "")
                            + ": a checkpoint of another model size?");
                }
                sources.put(p.name(), new Source(f, e, ref.layout()));
                used.add(ref.tensor());
            }
        }
        for (String tensor : fileOf.keySet()) {
            if (!used.contains(tensor) && !ignorable.test(tensor)) {
                throw new IllegalArgumentException(fileOf.get(tensor).path() + " holds tensor " + tensor
                        + ", which no parameter of the model takes: a checkpoint of a larger model, or another family?");
            }
        }
        for (Source s : sources.values()) {
            requireFinite(s);
        }
        return new PretrainedWeights(List.copyOf(files), sources);
    }

    /**
     * Refuses a tensor holding NaN or an infinity, naming it and the first such element. Without this
     * the run would fail at its first step as a divergence ("try a lower --lr"), blaming the wrong
     * thing; the extra read of every tensor costs far less than that first step.
     */
    private static void requireFinite(Source s) {
        long n = s.entry.numel();
        float[] chunk = new float[(int) Math.min(n, 1 << 16)];
        for (long first = 0; first < n; first += chunk.length) {
            int count = (int) Math.min(chunk.length, n - first);
            s.file.read(s.entry.name(), first, chunk, 0, count);
            for (int i = 0; i < count; i++) {
                if (!Float.isFinite(chunk[i])) {
                    throw new IllegalArgumentException(s.file.path() + ": tensor " + s.entry.name() + " holds "
                            + chunk[i] + " (element " + (first + i) + " of " + n + "): weights with NaN or Inf cannot"
                            + " start a run; give weights saved before the run that wrote them diverged");
                }
            }
        }
    }

    /** The files behind the weights, in the order they were opened. */
    public List<SafetensorsFile> files() {
        return files;
    }

    /** Refuses a model these weights were not opened for: a parameter without a tensor, or of another shape. */
    @Override
    public void check(List<ParamSpec> params) {
        for (ParamSpec p : params) {
            Source s = sources.get(p.name());
            long[] want = s == null ? null : s.layout == TensorRef.Layout.TRANSPOSED ? transposed(p) : p.shape();
            if (s == null || !Arrays.equals(s.entry.shape(), want)) {
                throw new IllegalArgumentException("the weights were opened for another model: the model's parameter " + p
                        + (s == null ? " has no tensor" : " does not fit tensor " + s.entry.name() + " "
                        + Arrays.toString(s.entry.shape())));
            }
        }
    }

    @Override
    public void fill(ParamSpec spec, long firstElement, float[] out, int outOffset, int count) {
        Source s = sources.get(spec.name());
        if (s == null) {
            throw new IllegalArgumentException("no pretrained tensor for parameter " + spec.name()
                    + ": these weights were opened for another model");
        }
        if (s.layout == TensorRef.Layout.AS_IS) {
            s.file.read(s.entry.name(), firstElement, out, outOffset, count);
            return;
        }
        // parameter (R, C) = tensor (C, R)ᵀ: the parameter's rows r0..r1 are the tensor's columns r0..r1,
        // so read those columns of each tensor row, then pick the requested elements
        long[] shape = spec.shape();
        long cols = shape[1];
        long r0 = firstElement / cols;
        long r1 = (firstElement + count - 1) / cols;
        int width = Math.toIntExact(r1 - r0 + 1);
        long tensorRows = cols;
        long tensorCols = shape[0];
        float[] block = new float[Math.toIntExact(tensorRows * width)];   // (C, width): tensor rows, columns r0..r1
        for (long c = 0; c < tensorRows; c++) {
            s.file.read(s.entry.name(), c * tensorCols + r0, block, Math.toIntExact(c * width), width);
        }
        for (int i = 0; i < count; i++) {
            long p = firstElement + i;
            long r = p / cols;
            long c = p % cols;
            out[outOffset + i] = block[Math.toIntExact(c * width + (r - r0))];
        }
    }

    /** Closes every file; idempotent. */
    @Override
    public void close() {
        files.forEach(SafetensorsFile::close);
    }

    private static long[] transposed(ParamSpec p) {
        long[] s = p.shape();
        if (s.length != 2) {
            throw new IllegalArgumentException("parameter " + p + " is not 2-D, so it cannot be stored transposed");
        }
        return new long[] {s[1], s[0]};
    }

    /**
     * Opens the safetensors files at {@code location}: the file itself, or a directory's
     * model.safetensors or sharded index (model.safetensors.index.json and the files it names).
     * Every file's header is checked here; the caller closes them.
     */
    public static List<SafetensorsFile> openFiles(Path location) {
        if (!Files.isDirectory(location)) {
            if (!Files.isRegularFile(location)) {
                throw new IllegalArgumentException("the weights " + location + " do not exist");
            }
            return List.of(SafetensorsFile.open(location));
        }
        Path index = location.resolve(SHARDED_INDEX);
        if (!Files.isRegularFile(index)) {
            Path single = location.resolve(SINGLE_FILE);
            if (!Files.isRegularFile(single)) {
                throw new IllegalArgumentException(location + " holds neither " + SINGLE_FILE + " nor " + SHARDED_INDEX);
            }
            return List.of(SafetensorsFile.open(single));
        }
        TreeSet<String> names = new TreeSet<>();
        try {
            JsonNode map = new ObjectMapper().readTree(index.toFile()).get("weight_map");
            if (map == null || !map.isObject()) {
                throw new IllegalArgumentException(index + " has no weight_map object");
            }
            for (Iterator<JsonNode> it = map.elements(); it.hasNext(); ) {
                String file = it.next().asText();
                if (file.isEmpty() || file.contains("/") || file.contains("\\")) {
                    throw new IllegalArgumentException(index + " names the file '" + file + "', not a file of " + location);
                }
                names.add(file);
            }
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read " + index + ": " + e.getMessage(), e);
        }
        List<SafetensorsFile> opened = new ArrayList<>();
        try {
            for (String name : names) {
                opened.add(SafetensorsFile.open(location.resolve(name)));
            }
        } catch (RuntimeException e) {
            opened.forEach(SafetensorsFile::close);
            throw e;
        }
        return opened;
    }
}
