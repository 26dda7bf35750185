// GpuOpTimes, the per-op GPU time table behind -Dfsdp4j.opTimes=true, on a GPU (or the stand-in):
// each op is booked once under its key with the GPU time from its mark to the next mark on its
// stream, a GEMM with its FLOPs, the host's waits apart, nothing after a reset counted from before,
// and the booked times add up to no more than the wall time they were issued in.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.OpTiming;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("gpu")
class GpuOpTimesTest {

    @Test
    void eachOpIsBookedOnceWithTheTimeToTheNextMark() {
        int n = 256;
        try (CudaBackend be = CudaRuntimeTest.gpu(new MemoryTracker("op-times"), CudaOptions.defaults());
             Tensor a = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n, n);
             Tensor b = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n, n);
             Tensor c = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n, n)) {
            GpuOpTimes times = new GpuOpTimes();
            CudaStream s = be.currentStream();
            times.mark(s, "before the reset", 0);
            be.fill(a, 1f);
            times.reset();
            String gemm = OpTiming.gemmKey(false, false, n, n, n, 1, "F32·F32→F32");
            long t0 = System.nanoTime();
            times.mark(s, "fill", 0);
            be.fill(a, 1f);
            be.fill(b, 2f);
            for (int i = 0; i < 3; i++) {
                times.mark(s, gemm, 2L * n * n * n);
                be.gemm(false, false, n, n, n, 1f, a, n, 0, b, n, 0, 0f, c, n, 0, 1);
            }
            s.synchronize();
            times.afterHostWait(s);
            times.mark(s, "fill", 0);
            be.fill(c, 0f);
            times.mark(s, "the end", 0);
            s.synchronize();
            double wallMs = (System.nanoTime() - t0) / 1e6;
            times.flush(s);

            assertEquals(0, times.callsAndMs("before the reset")[0], "a mark from before the reset was booked");
            double[] fill = times.callsAndMs("fill");
            double[] gemms = times.callsAndMs(gemm);
            double[] idle = times.callsAndMs(GpuOpTimes.IDLE);
            assertEquals(2, fill[0], times.table());
            assertEquals(3, gemms[0], times.table());
            assertEquals(1, idle[0], times.table());
            assertEquals(0, times.callsAndMs("the end")[0], "the last mark has no end and is not booked");
            assertTrue(gemms[1] > 0, times.table());
            double booked = fill[1] + gemms[1] + idle[1];
            assertTrue(booked <= wallMs + 0.5, "booked " + booked + " ms of GPU time in " + wallMs + " ms\n" + times.table());
            String table = times.table();
            assertTrue(table.contains(gemm) && table.contains("TFLOP/s"), table);
        }
    }
}
