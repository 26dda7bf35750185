// Host storage and the backend's plumbing: allocations are tracked per category and freed on
// close, closed storage fails loudly (double close is a no-op), byte/float views expose
// exactly a tensor's range, oversized tensors get a clear error, ServiceLoader finds the
// provider, and CPU streams/events are trivially complete.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.BackendProvider;
import org.fsdp4j.backend.Backends;
import org.junit.jupiter.api.Test;

class CpuStorageTest {

    @Test
    void allocationsAreTrackedAndFreedOnce() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            Tensor p = s.backend.allocate(DType.F32, MemoryCategory.PARAMS, 10, 3);
            Tensor g = s.backend.allocate(DType.BF16, MemoryCategory.GRADS, 7);
            assertEquals(120, s.tracker.liveBytes(MemoryCategory.PARAMS));
            assertEquals(14, s.tracker.liveBytes(MemoryCategory.GRADS));
            assertEquals(134, s.tracker.liveBytes());
            p.close();
            p.close();   // idempotent
            assertEquals(0, s.tracker.liveBytes(MemoryCategory.PARAMS));
            assertEquals(120, s.tracker.peakBytes(MemoryCategory.PARAMS));
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.backend.fill(p, 1f));
            assertTrue(e.getMessage().contains("closed"), e.getMessage());
            assertThrows(IllegalStateException.class, () -> CpuStorage.byteView(p));
            assertThrows(IllegalStateException.class, () -> g.view(0, 1).close(), "closing a view is a bug");
            g.close();
            assertEquals(0, s.tracker.liveBytes());
        }
    }

    @Test
    void viewsExposeExactlyATensorsBytes() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            double[][] v = new double[1][];
            try (Tensor t = s.random(DType.F32, 1, v, 50)) {
                Tensor part = t.view(7, 5);
                FloatBuffer f = CpuStorage.floatView(part);
                assertEquals(5, f.capacity());
                for (int i = 0; i < 5; i++) {
                    assertEquals(v[0][7 + i], f.get(i), 0.0);
                }
                f.put(2, 42f);   // writes through to the tensor
                assertEquals(42f, s.backend.toHost(t)[9]);
                assertEquals(ByteOrder.nativeOrder(), CpuStorage.byteView(part).order());
                assertEquals(20, CpuStorage.byteView(part).capacity());
                assertThrows(IllegalArgumentException.class, () -> CpuStorage.floatView(part.reinterpret(DType.I32)));
            }
        }
    }

    @Test
    void oversizedTensorsAreRefusedWithTheLimit() {
        try (CpuTestSupport s = new CpuTestSupport()) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> s.backend.allocate(DType.F32, MemoryCategory.PARAMS, 1L << 29));
            assertTrue(e.getMessage().contains("2147483647") && e.getMessage().contains("params"), e.getMessage());
            assertEquals(0, s.tracker.liveBytes());
        }
    }

    @Test
    void serviceLoaderFindsTheCpuProvider() {
        BackendProvider p = Backends.provider(Device.Kind.CPU).orElseThrow();
        assertTrue(p.unavailableReason().isEmpty(), () -> p.unavailableReason().get());
        assertEquals(1, p.deviceCount());
        assertThrows(IllegalArgumentException.class,
                () -> p.create(Device.cuda(0), new MemoryTracker("x"), new BackendOptions(1, false)));
        assertThrows(IllegalArgumentException.class, () -> new BackendOptions(-1, false));
        try (Backend all = p.create(Device.CPU, new MemoryTracker("x"), new BackendOptions(0, false))) {
            assertTrue(all.name().contains(Runtime.getRuntime().availableProcessors() + " threads"), all.name());
        }
    }

    @Test
    void aClosedBackendRefusesWork() {
        CpuTestSupport s = new CpuTestSupport();
        Tensor t = s.backend.allocate(DType.F32, MemoryCategory.ACTIVATIONS, 4);
        s.close();
        s.close();
        assertThrows(IllegalStateException.class, () -> s.backend.fill(t, 0f));
        assertThrows(IllegalStateException.class, () -> s.backend.gemm(false, false, 2, 2, 1, 1f, t, t, 0f, t));
        t.close();
    }
}
