// The peak table matches the names CUDA reports (PCIe H100 apart from SXM, L40S before L4),
// picks the fp32 peak by whether TF32 is on, and answers "unknown" rather than guess.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.DType;
import org.junit.jupiter.api.Test;

class DevicePeaksTest {

    @Test
    void namesAsCudaReportsThem() {
        assertEquals(989.4, DevicePeaks.tflops("NVIDIA H200", DType.BF16, false).orElseThrow());
        assertEquals(989.4, DevicePeaks.tflops("NVIDIA H100 80GB HBM3", DType.F16, false).orElseThrow());
        assertEquals(756.0, DevicePeaks.tflops("NVIDIA H100 PCIe", DType.BF16, false).orElseThrow());
        assertEquals(312.0, DevicePeaks.tflops("NVIDIA A100-SXM4-80GB", DType.BF16, false).orElseThrow());
        assertEquals(2250.0, DevicePeaks.tflops("NVIDIA B200", DType.BF16, false).orElseThrow());
        assertEquals(362.1, DevicePeaks.tflops("NVIDIA L40S", DType.BF16, false).orElseThrow());
        assertEquals(121.0, DevicePeaks.tflops("NVIDIA L4", DType.BF16, false).orElseThrow());
    }

    @Test
    void fp32IsCudaCoresUnlessTf32() {
        assertEquals(66.9, DevicePeaks.tflops("NVIDIA H200", DType.F32, false).orElseThrow());
        assertEquals(494.7, DevicePeaks.tflops("NVIDIA H200", DType.F32, true).orElseThrow());
        assertEquals(51.2, DevicePeaks.tflops("NVIDIA H100 PCIe", DType.F32, false).orElseThrow());
        assertEquals(19.5, DevicePeaks.tflops("NVIDIA A100-SXM4-80GB", DType.F32, false).orElseThrow());
    }

    @Test
    void unknownIsEmpty() {
        assertTrue(DevicePeaks.tflops("NVIDIA B200", DType.F32, false).isEmpty());
        assertTrue(DevicePeaks.tflops("NVIDIA L4", DType.F32, true).isEmpty());
        assertTrue(DevicePeaks.tflops("NVIDIA H200", DType.I32, false).isEmpty());
        assertTrue(DevicePeaks.tflops("NVIDIA GeForce RTX 4090", DType.BF16, false).isEmpty());
    }
}
