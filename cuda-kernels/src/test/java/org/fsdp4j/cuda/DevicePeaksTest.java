// The peak table matches the names CUDA reports (PCIe H100 apart from SXM, L40S before L4) and
// answers "unknown" rather than guess for fp32 or an unlisted GPU.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.tensor.DType;
import org.junit.jupiter.api.Test;

class DevicePeaksTest {

    @Test
    void namesAsCudaReportsThem() {
        assertEquals(989.4, DevicePeaks.halfTflops("NVIDIA H200", DType.BF16).orElseThrow());
        assertEquals(989.4, DevicePeaks.halfTflops("NVIDIA H100 80GB HBM3", DType.F16).orElseThrow());
        assertEquals(756.0, DevicePeaks.halfTflops("NVIDIA H100 PCIe", DType.BF16).orElseThrow());
        assertEquals(312.0, DevicePeaks.halfTflops("NVIDIA A100-SXM4-80GB", DType.BF16).orElseThrow());
        assertEquals(2250.0, DevicePeaks.halfTflops("NVIDIA B200", DType.BF16).orElseThrow());
        assertEquals(362.1, DevicePeaks.halfTflops("NVIDIA L40S", DType.BF16).orElseThrow());
        assertEquals(121.0, DevicePeaks.halfTflops("NVIDIA L4", DType.BF16).orElseThrow());
    }

    @Test
    void unknownIsEmpty() {
        assertTrue(DevicePeaks.halfTflops("NVIDIA H200", DType.F32).isEmpty());
        assertTrue(DevicePeaks.halfTflops("NVIDIA GeForce RTX 4090", DType.BF16).isEmpty());
    }
}
