// The CPU backend behaves as a GPU does: work on a stream runs in issue order after the call
// has returned; events order one stream after another (also across backends, as ranks and an
// offload host do); a failure is sticky and reaches the host at its next synchronisation; memory
// is reused in stream order, a recordStream'd block only once the other stream is done, and the
// debug mode poisons what it hands out again; only the calls that read to the host count as
// host synchronisations.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class CpuStreamsTest {

    private static CpuBackend backend(boolean debug) {
        return new CpuBackend(new MemoryTracker("streams"), 1, debug);
    }

    /** Blocks the stream until the latch opens. */
    private static Runnable gate(CountDownLatch open) {
        return () -> {
            try {
                assertTrue(open.await(30, TimeUnit.SECONDS), "the test never opened the gate");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    private static void sleepMs(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static long address(Tensor t) {
        return CpuStorage.of(t).pointer().address();
    }

    @Test
    void workRunsInIssueOrderAfterTheCallReturns() {
        try (CpuBackend be = backend(false); Backend.Stream s = be.newStream("side");
             Tensor x = be.allocate(DType.F32, MemoryCategory.WORKSPACE, 1000)) {
            CountDownLatch open = new CountDownLatch(1);
            s.launchHostFunc(gate(open));
            try (Backend.StreamScope on = be.onStream(s)) {
                be.fill(x, 3f);                 // returns at once: the stream is held at the gate
                be.scale(x, 2f);
            }
            Backend.Event done = s.record();
            assertFalse(done.isDone(), "queued work must not have run yet");
            open.countDown();
            be.computeStream().waitFor(done);
            float[] host = be.toHost(x);
            for (float v : host) {
                assertEquals(6f, v);
            }
        }
    }

    @Test
    void eventsOrderOneStreamAfterAnotherAcrossBackends() {
        for (boolean debug : new boolean[] {false, true}) {
            try (CpuBackend a = backend(debug); CpuBackend b = backend(debug);
                 Backend.Stream sa = a.newStream("producer");
                 Tensor src = a.allocate(DType.BF16, MemoryCategory.WORKSPACE, 4096);
                 Tensor dst = b.allocate(DType.F32, MemoryCategory.WORKSPACE, 4096)) {
                CountDownLatch open = new CountDownLatch(1);
                sa.launchHostFunc(gate(open));
                try (Backend.StreamScope on = a.onStream(sa)) {
                    a.fill(src, 1.5f);
                }
                Thread opener = new Thread(() -> {        // an inline compute stream waits on its host thread,
                    sleepMs(50);                          // so the gate opens from another one, a bit later
                    open.countDown();
                });
                opener.start();
                b.computeStream().waitFor(sa.record());   // b's compute copies only after a's producer filled
                b.copy(src, dst);
                float[] host = b.toHost(dst);
                for (float v : host) {
                    assertEquals(1.5f, v, "debug " + debug);
                }
            }
        }
    }

    @Test
    void aFailureIsStickyAndReachesTheHostAtItsNextSynchronisation() {
        try (CpuBackend be = backend(false); Backend.Stream s = be.newStream("failing");
             Backend.Stream other = be.newStream("waiting");
             Tensor x = be.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
            s.launchHostFunc(() -> {
                throw new IllegalStateException("injected");
            });
            try (Backend.StreamScope on = be.onStream(s)) {
                be.fill(x, 7f);                 // skipped: the stream has failed
            }
            Backend.Event after = s.record();
            other.waitFor(after);               // the failure spreads to whoever waits for it
            IllegalStateException e = assertThrows(IllegalStateException.class, s::synchronize);
            assertEquals("injected", e.getMessage());
            assertThrows(IllegalStateException.class, after::synchronize);
            assertThrows(IllegalStateException.class, other::synchronize);
            assertArrayEquals(new float[8], be.toHost(x), "work after the failure was skipped");
        }
    }

    @Test
    void memoryIsReusedInStreamOrderAndARecordedStreamHoldsItsBlock() {
        try (CpuBackend be = backend(false); Backend.Stream reader = be.newStream("reader")) {
            long numBytes = 1 << 20;                               // big enough to be cached
            Tensor t = be.allocate(DType.F32, MemoryCategory.WORKSPACE, numBytes / 4);
            long first = address(t);
            t.close();
            Tensor again = be.allocate(DType.F32, MemoryCategory.WORKSPACE, numBytes / 4);
            assertEquals(first, address(again), "a block freed on a stream is reused on it at once");

            CountDownLatch open = new CountDownLatch(1);
            reader.waitFor(be.computeStream().record());
            reader.launchHostFunc(gate(open));
            be.recordStream(again, reader);                        // the reader still has work to do with it
            again.close();
            Tensor meanwhile = be.allocate(DType.F32, MemoryCategory.WORKSPACE, numBytes / 4);
            assertNotEquals(first, address(meanwhile), "the reader is not done: the block must wait");
            open.countDown();
            reader.synchronize();
            Tensor after = be.allocate(DType.F32, MemoryCategory.WORKSPACE, numBytes / 4);
            assertEquals(first, address(after), "once the reader is done the block is reused");
            assertThrows(IllegalArgumentException.class, () -> be.recordStream(after, new CpuBackend(
                    new MemoryTracker("other"), 1).computeStream()), "a stream of another backend");
            meanwhile.close();
            after.close();
        }
    }

    @Test
    void theDebugModePoisonsMemoryBeforeItIsUsedAgain() {
        try (CpuBackend be = backend(true)) {
            Tensor fresh = be.allocate(DType.F32, MemoryCategory.WORKSPACE, 64);
            assertTrue(Float.isNaN(be.toHost(fresh)[0]), "fresh memory is poisoned");
            be.fill(fresh, 1f);
            fresh.close();
            try (Tensor reused = be.allocate(DType.BF16, MemoryCategory.WORKSPACE, 128)) {
                for (float v : be.toHost(reused)) {
                    assertTrue(Float.isNaN(v), "a reused block reads NaN until written");
                }
            }
            try (Tensor tokens = be.allocate(DType.I32, MemoryCategory.WORKSPACE, 4)) {
                int[] host = new int[4];
                be.copyToHost(tokens, host, 0);
                assertArrayEquals(new int[] {-1, -1, -1, -1}, host, "an unwritten token is out of any vocabulary");
            }
            assertTrue(be.name().contains("debug streams"), be.name());
        }
    }

    @Test
    void onlyReadsToTheHostCountAsHostSynchronisations() {
        for (boolean debug : new boolean[] {false, true}) {
            try (CpuBackend be = backend(debug); Backend.Stream s = be.newStream("side");
                 Tensor x = be.allocate(DType.F32, MemoryCategory.WORKSPACE, 100);
                 Tensor sum = be.zeros(DType.F32, MemoryCategory.WORKSPACE, 1)) {
                long before = be.hostSyncs();
                be.fill(x, 0.5f);
                be.scale(x, 2f);
                be.sumInto(x, 0.25f, sum);
                be.sumOfSquaresInto(x, 1f, sum);
                s.waitFor(be.computeStream().record());
                be.computeStream().waitFor(s.record());
                assertEquals(before, be.hostSyncs(), "issuing work and ordering streams never blocks the host");
                assertEquals(125f, be.toHost(sum)[0], "Σ 0.25·x + Σ x² over 100 ones");
                assertEquals(before + 1, be.hostSyncs());
                assertEquals(100.0, be.sum(x));
                be.synchronize();
                s.synchronize();
                s.record().synchronize();
                assertEquals(before + 5, be.hostSyncs());
            }
        }
    }
}
