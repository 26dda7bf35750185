// Dense (no sparsity) peaks of the NVIDIA GPUs fsdp4j is measured on, looked up by the device
// name CUDA reports, for CudaBackend.peakTflops: what bench gemm's %peak and bench step's MFU
// are relative to. From NVIDIA's data sheets (SXM parts unless the name says PCIe); a GPU or a
// dtype not listed has no peak, and the reports say so rather than guess.
package org.fsdp4j.cuda;

import java.util.Locale;
import java.util.OptionalDouble;
import org.fsdp4j.api.DType;

final class DevicePeaks {

    /** One row: the name fragment to match and its TFLOP/s as {half tensor core, TF32 tensor core, fp32 CUDA core}; NaN = unknown. */
    private record Row(String fragment, boolean pcie, double half, double tf32, double fp32) {
        boolean matches(String upperName) {
            return upperName.contains(fragment) && (!pcie || upperName.contains("PCIE"));
        }
    }

    // Order matters: the first match wins (H100 PCIe before H100 SXM, L40S before L4, ...).
    private static final Row[] ROWS = {
        new Row("H200", false, 989.4, 494.7, 66.9),
        new Row("H100", true, 756.0, 378.0, 51.2),
        new Row("H100", false, 989.4, 494.7, 66.9),
        new Row("B200", false, 2250.0, Double.NaN, Double.NaN),
        new Row("A100", false, 312.0, 156.0, 19.5),
        new Row("L40S", false, 362.1, Double.NaN, 91.6),
        new Row("L4", false, 121.0, Double.NaN, 30.3),
        new Row("A10", false, 125.0, Double.NaN, 31.2),
    };

    private DevicePeaks() {
    }

    /**
     * TFLOP/s of a GEMM with {@code operands}: fp16/bf16 on tensor cores with fp32 accumulation,
     * fp32 on TF32 tensor cores when {@code tf32} is on, else on CUDA cores. Empty when unknown.
     */
    static OptionalDouble tflops(String deviceName, DType operands, boolean tf32) {
        String n = deviceName.toUpperCase(Locale.ROOT);
        for (Row r : ROWS) {
            if (r.matches(n)) {
                double v = operands.isHalf() ? r.half() : operands == DType.F32 ? (tf32 ? r.tf32() : r.fp32()) : Double.NaN;
                return Double.isNaN(v) ? OptionalDouble.empty() : OptionalDouble.of(v);
            }
        }
        return OptionalDouble.empty();
    }
}
