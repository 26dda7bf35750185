// Dense (no sparsity) tensor-core peaks of the NVIDIA GPUs fsdp4j is measured on, looked up by
// the device name CUDA reports, for CudaBackend.peakTflops: what bench gemm's %peak and MFU are
// relative to. From NVIDIA's data sheets (SXM parts unless the name says PCIe).
package org.fsdp4j.cuda;

import java.util.Locale;
import java.util.OptionalDouble;
import org.fsdp4j.tensor.DType;

final class DevicePeaks {

    private DevicePeaks() {
    }

    /** TFLOP/s for fp16/bf16 inputs with fp32 accumulation; empty for fp32 and for GPUs not in the table. */
    static OptionalDouble halfTflops(String deviceName, DType operands) {
        if (!operands.isHalf()) {
            return OptionalDouble.empty();   // fp32 (or TF32) GEMMs: no entry in this table
        }
        String n = deviceName.toUpperCase(Locale.ROOT);
        if (n.contains("H200") || (n.contains("H100") && !n.contains("PCIE"))) {
            return OptionalDouble.of(989.4);
        }
        if (n.contains("H100")) {
            return OptionalDouble.of(756.0);
        }
        if (n.contains("B200")) {
            return OptionalDouble.of(2250.0);
        }
        if (n.contains("A100")) {
            return OptionalDouble.of(312.0);
        }
        if (n.contains("L40S")) {
            return OptionalDouble.of(362.1);
        }
        if (n.contains("L4")) {
            return OptionalDouble.of(121.0);
        }
        if (n.contains("A10")) {
            return OptionalDouble.of(125.0);
        }
        return OptionalDouble.empty();
    }
}
