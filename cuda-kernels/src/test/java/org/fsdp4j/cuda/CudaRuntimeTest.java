// The CUDA-only machinery on a real GPU: the caching allocator reaches a steady state with no
// cudaMalloc, streams hand work over through events, the embedding backward is bit-for-bit
// repeatable, TF32 is used only when asked, a bad launch is a typed error, and closed handles
// fail loudly. Size classes are plain arithmetic and run everywhere.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

class CudaRuntimeTest {

    final OpCheck c = new OpCheck();

    static CudaBackend gpu(MemoryTracker tracker, CudaOptions options) {
        StandIns.assumeGpu();
        return new CudaBackend(0, tracker, options);
    }

    @Test
    void sizeClassesRoundUp() {
        assertEquals(512, CachingAllocator.sizeClass(0));
        assertEquals(512, CachingAllocator.sizeClass(1));
        assertEquals(1024, CachingAllocator.sizeClass(513));
        assertEquals(1L << 20, CachingAllocator.sizeClass(1L << 20));
        assertEquals(2L << 20, CachingAllocator.sizeClass((1L << 20) + 1));
        assertEquals(4L << 20, CachingAllocator.sizeClass((2L << 20) + 1));
    }

    @Test
    @Tag("gpu")
    void theAllocatorReachesASteadyStateWithoutCudaMalloc() {
        MemoryTracker tracker = new MemoryTracker("gpu");
        try (CudaBackend be = gpu(tracker, CudaOptions.defaults())) {
            long afterFirst = -1;
            for (int step = 0; step < 4; step++) {
                try (Tensor params = be.allocate(DType.F32, MemoryCategory.PARAMS, 1000, 777);
                     Tensor acts = be.allocate(DType.BF16, MemoryCategory.ACTIVATIONS, 3, 5000);
                     Tensor small = be.allocate(DType.I32, MemoryCategory.WORKSPACE, 9)) {
                    assertEquals(1000L * 777 * 4, tracker.liveBytes(MemoryCategory.PARAMS));
                    assertEquals(3L * 5000 * 2, tracker.liveBytes(MemoryCategory.ACTIVATIONS));
                    be.fill(params, 1f);
                    be.fill(acts, 2f);
                    be.fill(small, 3f);
                }
                assertEquals(0, tracker.liveBytes());
                if (step == 0) {
                    afterFirst = be.allocatorStats().cudaMallocCalls();
                }
            }
            AllocatorStats s = be.allocatorStats();
            assertEquals(afterFirst, s.cudaMallocCalls(), "cudaMalloc ran after the first step: " + s);
            assertTrue(s.reservedBytes() >= s.peakInUseBytes() && s.inUseBytes() == 0, s.toString());
        }
    }

    @Test
    @Tag("gpu")
    void streamsHandOverThroughEvents() {
        try (CudaBackend be = gpu(new MemoryTracker("gpu"), CudaOptions.defaults());
             Backend.Stream gather = be.newStream("all-gather")) {
            int n = 1 << 24;   // big enough that an unordered read would see the old values
            try (Tensor x = be.allocate(DType.F32, MemoryCategory.GATHERED, n);
                 Tensor y = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n)) {
                be.fill(x, 0f);
                be.fill(y, 1f);
                be.synchronize();
                gather.waitFor(be.computeStream().record());
                try (Backend.StreamScope on = be.onStream(gather)) {
                    be.fill(x, 2f);
                    be.scale(x, 1.5f);
                }
                Backend.Event done = gather.record();
                be.computeStream().waitFor(done);
                be.add(x, y, y);
                done.synchronize();
                float[] host = be.toHost(y);
                for (int i = 0; i < n; i += 4099) {
                    assertEquals(4f, host[i], "element " + i);
                }
            }
        }
    }

    @Test
    @Tag("gpu")
    void aRecordedStreamKeepsItsBlockAndNoStreamWaitsForAFree() {
        try (CudaBackend be = gpu(new MemoryTracker("gpu"), CudaOptions.defaults());
             Backend.Stream reader = be.newStream("reduce-scatter");
             Tensor sink = be.allocate(DType.F32, MemoryCategory.WORKSPACE, 1)) {
            int n = 1 << 24;
            Tensor grad = be.allocate(DType.F32, MemoryCategory.GRADS, n);
            long address = DeviceTensors.address(grad);
            be.fill(grad, 1f);
            reader.waitFor(be.computeStream().record());
            java.util.concurrent.CountDownLatch open = new java.util.concurrent.CountDownLatch(1);
            reader.launchHostFunc(() -> {
                try {
                    open.await(30, java.util.concurrent.TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            try (Backend.StreamScope on = be.onStream(reader)) {
                be.fill(sink, 0f);
                be.sumInto(grad, 1f, sink);           // the reader still has to read grad
            }
            be.recordStream(grad, reader);
            grad.close();
            long reusedAt;
            try (Tensor next = be.allocate(DType.F32, MemoryCategory.GRADS, n)) {
                reusedAt = DeviceTensors.address(next);
                be.fill(next, 3f);                    // the next owner writes at once, on the compute stream
                be.computeStream().record().synchronize();   // the compute stream never waited for the reader
            } finally {
                open.countDown();
            }
            reader.synchronize();
            assertEquals(n, be.toHost(sink)[0], 0f, "the reader summed the freed gradient's ones, not what the"
                    + " block's next owner wrote into it (a block freed while another stream still read it)");
            assertTrue(reusedAt != address, "the reader is not done: the block waits");
            try (Tensor after = be.allocate(DType.F32, MemoryCategory.GRADS, n)) {
                assertEquals(address, DeviceTensors.address(after), "once the reader is done the block is reused");
            }
        }
    }

    @Test
    @Tag("gpu")
    void uploadsAndDeviceSumsDoNotWaitOnlyReadsDo() {
        try (CudaBackend be = gpu(new MemoryTracker("gpu"), CudaOptions.defaults());
             Tensor x = be.allocate(DType.BF16, MemoryCategory.ACTIVATIONS, 3000);
             Tensor sum = be.zeros(DType.F32, MemoryCategory.WORKSPACE, 1)) {
            float[] ones = new float[3000];
            java.util.Arrays.fill(ones, 1f);
            long before = be.hostSyncs();
            for (int step = 0; step < 5; step++) {
                be.copyFromHost(ones, 0, x);
                be.sumInto(x, 0.5f, sum);
                be.sumOfSquaresInto(x, 1f, sum);
            }
            assertEquals(before, be.hostSyncs(), "uploads and device sums never block the host");
            // An upload pins a new buffer only while the copies before it are still queued: at most
            // one per upload in flight (how many depends on how far the device lags).
            assertTrue(be.pinnedStagingBuffers() <= 5, "one staging buffer per upload in flight at most: "
                    + be.pinnedStagingBuffers());
            assertEquals(5 * (1500 + 3000), be.toHost(sum)[0], 0f);
            assertEquals(before + 1, be.hostSyncs());
            int pinned = be.pinnedStagingBuffers();
            for (int step = 0; step < 5; step++) {   // each copy done before the next upload: always reused
                be.copyFromHost(ones, 0, x);
                be.computeStream().synchronize();
            }
            assertEquals(pinned, be.pinnedStagingBuffers(), "a buffer whose copy is done is reused");
        }
    }

    @Test
    @Tag("gpu")
    void onlyMixedDtypeGemmsArePromoted() {
        try (CudaBackend be = gpu(new MemoryTracker("gpu"), CudaOptions.defaults());
             Tensor a = be.zeros(DType.BF16, MemoryCategory.ACTIVATIONS, 64, 32);
             Tensor w = be.zeros(DType.BF16, MemoryCategory.PARAMS, 16, 32);
             Tensor w32 = be.zeros(DType.F32, MemoryCategory.PARAMS, 16, 32);
             Tensor c = be.zeros(DType.BF16, MemoryCategory.ACTIVATIONS, 64, 16);
             Tensor c32 = be.zeros(DType.F32, MemoryCategory.ACTIVATIONS, 64, 16)) {
            be.gemm(false, true, 64, 16, 32, 1f, a, w, 0f, c);
            be.gemm(false, true, 64, 16, 32, 1f, a, w, 0f, c32);
            assertEquals(0, be.promotedCopies(), "bf16 × bf16 → bf16 or fp32 runs in cuBLAS as is");
            be.gemm(false, true, 64, 16, 32, 1f, a, w32, 0f, c32);
            assertEquals(1, be.promotedCopies(), "bf16 × fp32 needs a promoting copy");
        }
    }

    @Test
    @Tag("gpu")
    void embeddingBackwardIsBitForBitRepeatable() {
        int b = 8, t = 256, ch = 768, vocab = 50;
        try (CudaBackend be = gpu(new MemoryTracker("gpu"), CudaOptions.defaults())) {
            int[] tok = c.random.ints(b * t, 0, vocab).toArray();
            double[] g = c.values(DType.F32, b * t * ch, 1);
            float[][] results = new float[2][];
            for (int run = 0; run < 2; run++) {
                try (Tensor tt = OpCheck.ints(be, tok, b, t); Tensor tg = OpCheck.put(be, DType.F32, g, b, t, ch);
                     Tensor dwte = be.zeros(DType.F32, MemoryCategory.GRADS, vocab, ch);
                     Tensor dwpe = be.zeros(DType.F32, MemoryCategory.GRADS, t, ch)) {
                    be.embeddingBackward(tt, tg, dwte, dwpe);
                    results[run] = be.toHost(dwte);
                }
            }
            assertArrayEquals(results[0], results[1]);
        }
    }

    @Test
    @Tag("gpu")
    void tf32OnlyWhenAskedAndStillClose() {
        int m = 256, n = 256, k = 1024;
        double[] a = c.values(DType.F32, m * k, 1), b = c.values(DType.F32, k * n, 1);
        for (boolean tf32 : new boolean[] {false, true}) {
            try (CudaBackend be = gpu(new MemoryTracker("gpu"), new CudaOptions(tf32, CudaOptions.DEFAULT_CUBLAS_WORKSPACE_BYTES));
                 Tensor ta = OpCheck.put(be, DType.F32, a, m, k); Tensor tb = OpCheck.put(be, DType.F32, b, k, n);
                 Tensor tc = OpCheck.poisoned(be, DType.F32, m, n)) {
                assertEquals(tf32, be.name().contains("TF32"), be.name());
                be.gemm(false, false, m, n, k, 1f, ta, tb, 0f, tc);
                double[] ref = new double[m * n];
                for (int i = 0; i < m; i++) {
                    for (int p = 0; p < k; p++) {
                        for (int j = 0; j < n; j++) {
                            ref[i * n + j] += a[i * k + p] * b[p * n + j];
                        }
                    }
                }
                // TF32 keeps 10 mantissa bits per operand: errors ~ 2^-11 · sqrt(k) · |a||b|
                c.assertClose("gemm tf32=" + tf32, ref, be, tc, tf32 ? 0.05 : 1e-3, tf32 ? 1e-2 : 1e-5);
            }
        }
    }

    @Test
    @Tag("gpu")
    void badLaunchesAndClosedHandlesFailLoudly() {
        MemoryTracker tracker = new MemoryTracker("gpu");
        CudaBackend be = gpu(tracker, CudaOptions.defaults());
        Tensor x = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, 10);
        try (CudaModule module = new CudaModule(0)) {
            Kernel fill = module.kernel("fill_kernel");
            CudaException e = assertThrows(CudaException.class, () -> fill.launch2d(be.currentStream(), 1, 1, 4096, 1, 0,
                    DeviceTensors.address(x), 0, 10L, 1f));   // 4096 threads per block is over every GPU's limit
            assertTrue(e.getMessage().contains("fill_kernel") && e.getMessage().contains("cuda:0"), e.getMessage());
        }
        Backend.Stream s = be.newStream("reduce-scatter");
        s.close();
        s.close();   // idempotent
        assertThrows(IllegalArgumentException.class, () -> be.setStream(s));
        x.close();
        assertThrows(IllegalStateException.class, () -> be.fill(x, 1f));
        be.close();
        be.close();
        assertEquals(0, tracker.liveBytes());
    }
}
