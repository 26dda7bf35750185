// A checkpoint's parameters as one consolidated safetensors file, in Hugging Face's layout of its
// family, so that transformers opens it. A Llama's parameters already carry LlamaForCausalLM's names
// and layouts (LlamaWeights), so they are written as they are. A GPT is written in GPT-2's layout
// for GPT2LMHeadModel (and anything that reads safetensors): names transformer.wte.weight,
// transformer.h.0.attn.c_attn.weight, ...; GPT-2's Conv1D weights are stored (in, out), so fsdp4j's
// Linear weights, (out, in), are transposed; the LM head is tied to wte and not stored (as in GPT-2's
// own files). fsdp4j's block is GPT-2's (pre-LN, qkv rows [q | k | v], tanh GELU, LayerNorm eps 1e-5).
//
// safetensors: 8 bytes little-endian header length n, n bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end)}, "__metadata__": {str: str}} padded with
// spaces to a multiple of 8, then the tensors' bytes back to back (little-endian, row-major).
package org.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.model.HfLlamaConfig;

public final class SafetensorsExport {

    private static final Pattern BLOCK = Pattern.compile("h\\.(\\d+)\\.(.+)");
    private static final Map<String, String> ROOT_NAMES = Map.of("wte", "transformer.wte.weight",
            "wpe", "transformer.wpe.weight", "lnf.weight", "transformer.ln_f.weight", "lnf.bias", "transformer.ln_f.bias");
    private static final Map<String, String> BLOCK_NAMES = Map.ofEntries(
            Map.entry("ln1.weight", "ln_1.weight"), Map.entry("ln1.bias", "ln_1.bias"),
            Map.entry("attn.qkv.weight", "attn.c_attn.weight"), Map.entry("attn.qkv.bias", "attn.c_attn.bias"),
            Map.entry("attn.proj.weight", "attn.c_proj.weight"), Map.entry("attn.proj.bias", "attn.c_proj.bias"),
            Map.entry("ln2.weight", "ln_2.weight"), Map.entry("ln2.bias", "ln_2.bias"),
            Map.entry("mlp.fc.weight", "mlp.c_fc.weight"), Map.entry("mlp.fc.bias", "mlp.c_fc.bias"),
            Map.entry("mlp.proj.weight", "mlp.c_proj.weight"), Map.entry("mlp.proj.bias", "mlp.c_proj.bias"));

    private SafetensorsExport() {
    }

    /** What was written: the file, its tensors and bytes. */
    public record Exported(Path file, int tensors, long bytes) {
    }

    /** Hugging Face GPT-2's name for fsdp4j's parameter {@code name}. */
    public static String hfName(String name) {
        String root = ROOT_NAMES.get(name);
        if (root != null) {
            return root;
        }
        Matcher m = BLOCK.matcher(name);
        if (m.matches() && BLOCK_NAMES.containsKey(m.group(2))) {
            return "transformer.h." + m.group(1) + "." + BLOCK_NAMES.get(m.group(2));
        }
        throw new IllegalArgumentException("no Hugging Face GPT-2 name for parameter " + name);
    }

    /** Whether the parameter is a Linear weight that GPT-2's Conv1D stores transposed. */
    public static boolean transposed(String name, long[] shape) {
        return shape.length == 2 && name.startsWith("h.") && name.endsWith(".weight");
    }

    /**
     * Writes the checkpoint {@code reader} opened as {@code file} in {@code dtype} (F32, or BF16 or
     * F16 rounded to nearest even), under a temporary name renamed when complete. A value past
     * fp16's range (|x| &gt; 65504) is refused naming its tensor rather than written as infinity.
     */
    public static Exported write(CheckpointReader reader, Path file, DType dtype) {
        if (dtype != DType.F32 && dtype != DType.BF16 && dtype != DType.F16) {
            throw new IllegalArgumentException("export writes fp32, bf16 or fp16, not " + dtype.shortName());
        }
        int elementBytes = dtype.byteSize();
        CheckpointIndex index = reader.index();
        Map<String, Object> header = new LinkedHashMap<>();
        Map<String, String> metadata = new LinkedHashMap<>();
        metadata.put("format", "pt");
        metadata.put("source", "fsdp4j checkpoint " + reader.dir().getFileName());
        metadata.put("step", String.valueOf(index.step()));
        metadata.putAll(index.model().keys());
        header.put("__metadata__", metadata);
        boolean gpt2 = !(index.model() instanceof HfLlamaConfig);     // a Llama's names and layouts are Hugging Face's
        List<CheckpointIndex.Param> params = new ArrayList<>(index.params());
        long offset = 0;
        for (CheckpointIndex.Param p : params) {
            long[] shape = p.shape();
            long[] out = gpt2 && transposed(p.name(), shape) ? new long[] {shape[1], shape[0]} : shape;
            long bytes = p.numel() * elementBytes;
            header.put(gpt2 ? hfName(p.name()) : p.name(), Map.of("dtype", safetensorsName(dtype), "shape", out,
                    "data_offsets", new long[] {offset, offset + bytes}));
            offset += bytes;
        }
        byte[] json;
        try {
            json = new ObjectMapper().writeValueAsBytes(header);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        int padded = (json.length + 7) / 8 * 8;
        Path target = file.toAbsolutePath();
        Path tmp = target.resolveSibling("." + target.getFileName() + ".partial-" + ProcessHandle.current().pid());
        try {
            Files.createDirectories(target.getParent());
            try (OutputStream os = new java.io.BufferedOutputStream(Files.newOutputStream(tmp), 1 << 20)) {
                ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(padded);
                os.write(len.array());
                os.write(json);
                for (int i = json.length; i < padded; i++) {
                    os.write(' ');
                }
                for (CheckpointIndex.Param p : params) {
                    float[] v = reader.full(p.name(), ShardedStateDict.PARAM);
                    if (gpt2 && transposed(p.name(), p.shape())) {
                        v = transpose(v, Math.toIntExact(p.shape()[0]), Math.toIntExact(p.shape()[1]));
                    }
                    ByteBuffer b = ByteBuffer.allocate(v.length * elementBytes).order(ByteOrder.LITTLE_ENDIAN);
                    for (float x : v) {
                        switch (dtype) {
                            case F32 -> b.putFloat(x);
                            case BF16 -> b.putShort(DType.floatToBf16(x));
                            default -> b.putShort(toHalf(x, p.name()));
                        }
                    }
                    os.write(b.array());
                }
            }
            Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            return new Exported(target, params.size(), 8 + padded + offset);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + target + ": " + e.getMessage(), e);
        } finally {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // the move failed already; that error is the one to report
            }
        }
    }

    /** safetensors' name ("F32", "BF16", "F16") of a dtype export writes. */
    private static String safetensorsName(DType d) {
        return switch (d) {
            case F32 -> "F32";
            case BF16 -> "BF16";
            case F16 -> "F16";
            default -> throw new IllegalArgumentException("export writes fp32, bf16 or fp16, not " + d.shortName());
        };
    }

    /**
     * {@code x} as fp16 bits, rounded to nearest even; a finite value that fp16 cannot hold (it would
     * become infinity, and a model loaded from the file would diverge) is refused naming the tensor.
     */
    private static short toHalf(float x, String param) {
        short h = DType.floatToHalf(x);
        if (Float.isFinite(x) && (h & 0x7c00) == 0x7c00) {
            throw new IllegalArgumentException("parameter " + param + " holds " + x + ", past fp16's largest value 65504:"
                    + " export it with --dtype bf16 or fp32");
        }
        return h;
    }

    /** (rows, cols) row-major → (cols, rows) row-major. */
    private static float[] transpose(float[] a, int rows, int cols) {
        float[] t = new float[a.length];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                t[c * rows + r] = a[r * cols + c];
            }
        }
        return t;
    }
}
