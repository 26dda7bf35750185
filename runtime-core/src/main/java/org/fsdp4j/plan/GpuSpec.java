// The GPUs the planner knows: memory, dense peak rates, and the bandwidths its communication
// model uses. Memory is nvidia-smi's total; peaks are NVIDIA's dense (no sparsity) figures for the
// SXM parts; "NVLink" is the bus bandwidth NCCL reaches inside one 8-GPU node (nccl-tests busbw:
// ~200 GB/s on A100, ~360 GB/s on H100, the reports shared/reference/anchors.md cites; H200 has
// H100's NVLink 4), "network" the per-GPU share of the node's scale-out links (one 200 Gb/s HDR
// NIC per A100 in a DGX A100, one 400 Gb/s NDR NIC per H100/H200 in a DGX H100/H200).
// Bandwidths are GB/s with GB = 1e9 bytes, as nccl-tests reports them.
package org.fsdp4j.plan;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.fsdp4j.api.DType;

/**
 * @param name            as --gpu takes it
 * @param memoryBytes     device memory
 * @param bf16Tflops      dense bf16/fp16 tensor-core peak
 * @param fp32Tflops      dense fp32 peak (not TF32)
 * @param nvlinkGBps      bus bandwidth of collectives inside a node
 * @param networkGBps     bandwidth per GPU between nodes
 */
public record GpuSpec(String name, long memoryBytes, double bf16Tflops, double fp32Tflops, double nvlinkGBps,
                      double networkGBps) {

    private static final long MIB = 1L << 20;
    private static final Map<String, GpuSpec> PRESETS = new LinkedHashMap<>();

    static {
        PRESETS.put("a100-40gb", new GpuSpec("A100-40GB", 40_960 * MIB, 312, 19.5, 200, 25));
        PRESETS.put("a100-80gb", new GpuSpec("A100-80GB", 81_920 * MIB, 312, 19.5, 200, 25));
        PRESETS.put("h100-80gb", new GpuSpec("H100-80GB", 81_559 * MIB, 989, 67, 360, 50));
        PRESETS.put("h200-141gb", new GpuSpec("H200-141GB", 143_771 * MIB, 989, 67, 360, 50));
    }

    /** The preset called {@code name} (case-insensitive); an unknown one lists the known ones. */
    public static GpuSpec preset(String name) {
        GpuSpec g = PRESETS.get(name.trim().toLowerCase(Locale.ROOT));
        if (g == null) {
            throw new IllegalArgumentException("unknown GPU '" + name + "': use one of " + String.join(", ", names()));
        }
        return g;
    }

    public static List<String> names() {
        return PRESETS.values().stream().map(GpuSpec::name).toList();
    }

    /** The dense peak for GEMMs whose inputs are {@code dtype}, TFLOP/s. */
    public double peakTflops(DType dtype) {
        return dtype == DType.F32 ? fp32Tflops : bf16Tflops;
    }
}
