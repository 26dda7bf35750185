// CoreShare: a thread blocked on an event runs chunks of another thread's posted loop, every chunk
// runs exactly once, a helper's failure reaches the owner, and a shared PanelGemm has the bits of
// an unshared one.
package org.fsdp4j.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.FloatBuffer;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class CoreShareTest {

    /** A thread blocked in helpUntil on {@code event} (it returns when the event completes). */
    private static Thread blockedHelper(CompletableFuture<Void> event) {
        Thread t = new Thread(() -> CoreShare.helpUntil(event), "blocked-rank");
        t.setDaemon(true);
        t.start();
        return t;
    }

    private static void assumeSharing() {
        assumeTrue(CoreShare.ENABLED && Runtime.getRuntime().availableProcessors() > 1,
                "CoreShare lends a core only on a machine with more than one (and when not turned off)");
    }

    @Test
    void aBlockedThreadRunsChunksOfAnotherThreadsLoop() throws Exception {
        assumeSharing();
        CompletableFuture<Void> event = new CompletableFuture<>();
        Thread helper = blockedHelper(event);
        Thread owner = Thread.currentThread();
        CountDownLatch helped = new CountDownLatch(1);
        AtomicReference<Thread> other = new AtomicReference<>();
        // the owner holds its chunk until another thread has taken the other one
        CoreShare.run(2, c -> {
            if (Thread.currentThread() != owner) {
                other.set(Thread.currentThread());
                helped.countDown();
                return;
            }
            try {
                assertTrue(helped.await(20, TimeUnit.SECONDS), "no blocked thread took the posted chunk");
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        assertSame(helper, other.get());
        event.complete(null);
        helper.join(20_000);
        assertTrue(!helper.isAlive(), "the helper did not return when its event completed");
    }

    @Test
    void everyChunkRunsOnceWhileHelped() throws Exception {
        assumeSharing();
        CompletableFuture<Void> event = new CompletableFuture<>();
        Thread helper = blockedHelper(event);
        for (int round = 0; round < 50; round++) {
            int chunks = 1 + round * 7;
            AtomicIntegerArray runs = new AtomicIntegerArray(chunks);
            CoreShare.run(chunks, c -> {
                runs.incrementAndGet(c);
                double x = 0;
                for (int i = 0; i < 2000; i++) {
                    x += Math.sqrt(i + c);   // some work, so that the helper gets a share
                }
                if (x < 0) {
                    throw new AssertionError();
                }
            });
            for (int c = 0; c < chunks; c++) {
                assertEquals(1, runs.get(c), "chunk " + c + " of " + chunks);
            }
        }
        event.complete(null);
        helper.join(20_000);
    }

    @Test
    void aChunksFailureReachesTheOwnerWhoeverRanIt() throws Exception {
        assumeSharing();
        CompletableFuture<Void> event = new CompletableFuture<>();
        Thread helper = blockedHelper(event);
        CountDownLatch helped = new CountDownLatch(1);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> CoreShare.run(2, c -> {
            if (Thread.currentThread() == helper) {
                helped.countDown();
                throw new IllegalStateException("chunk " + c + " failed on the helper");
            }
            try {
                assertTrue(helped.await(20, TimeUnit.SECONDS), "no blocked thread took the posted chunk");
            } catch (InterruptedException ie) {
                throw new IllegalStateException(ie);
            }
        }));
        assertTrue(e.getMessage().contains("failed on the helper"), e.getMessage());
        event.complete(null);
        helper.join(20_000);
    }

    @Test
    void helpUntilReturnsWhenNothingIsPosted() throws Exception {
        CompletableFuture<Void> event = new CompletableFuture<>();
        Thread helper = blockedHelper(event);
        Thread.sleep(50);
        assertTrue(helper.isAlive(), "returned before its event completed");
        event.complete(null);
        helper.join(20_000);
        assertTrue(!helper.isAlive(), "did not return when its event completed");
    }

    @Test
    void aSharedPanelGemmHasTheBitsOfAnUnsharedOne() throws Exception {
        assumeSharing();
        Random r = new Random(3);
        int m = 700;
        int n = 150;
        int k = 600;
        float[] a = new float[m * k];
        float[] b = new float[k * n];
        for (int i = 0; i < a.length; i++) {
            a[i] = (float) r.nextGaussian();
        }
        for (int i = 0; i < b.length; i++) {
            b[i] = (float) r.nextGaussian();
        }
        float[] alone = new float[m * n];
        PanelGemm.sgemm(false, true, m, n, k, 1, FloatBuffer.wrap(a), 0, k, FloatBuffer.wrap(b), 0, k,
                0, FloatBuffer.wrap(alone), 0, n, false);
        CompletableFuture<Void> event = new CompletableFuture<>();
        Thread helper = blockedHelper(event);
        AtomicInteger calls = new AtomicInteger();
        for (int i = 0; i < 5; i++) {
            float[] shared = new float[m * n];
            PanelGemm.sgemm(false, true, m, n, k, 1, FloatBuffer.wrap(a), 0, k, FloatBuffer.wrap(b), 0, k,
                    0, FloatBuffer.wrap(shared), 0, n, true);
            assertArrayEquals(alone, shared, "call " + i);
            calls.incrementAndGet();
        }
        event.complete(null);
        helper.join(20_000);
        assertEquals(5, calls.get());
    }

    @Test
    void theOpTableSaysItsGemmTimesAreNotPerCoreOnceARankHelped() {
        OpTimes.reset();
        try {
            assertTrue(!OpTimes.table().contains("CoreShare"), OpTimes.table());
            OpTimes.helped(3, 1_000_000);
            String table = OpTimes.table();
            assertTrue(table.contains("not per-core rates; -Dfsdp4j.coreShare=false gives those"), table);
            assertTrue(table.contains("waits of issuing threads: of which running other ranks' chunks"), table);
        } finally {
            OpTimes.reset();
        }
    }
}
