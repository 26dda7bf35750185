// The NCCL group's watchdog and issue order, without a GPU: the recording NCCL of NcclCallSitesTest
// on CPU streams, whose events complete only when the stream gets there. A collective whose stream
// never gets past it is failed at the collective timeout, naming it, and every communicator is
// aborted; an asynchronous error NCCL reports fails the group within a second or so, naming the
// collective in flight; under the chained rule a rank's second collective (on another stream) runs
// only after its first, and under NCCL's implicit launch order it does not wait.
package org.fsdp4j.nccl;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.cpu.CpuBackend;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.Reduction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class NcclWatchdogTest {

    final NcclCallSitesTest.RecordingNccl nccl = new NcclCallSitesTest.RecordingNccl();
    final Map<Object, Long> bases = new IdentityHashMap<>();
    final Map<Backend.Stream, Long> streams = new IdentityHashMap<>();
    final CpuBackend backend = new CpuBackend(new MemoryTracker("watchdog test"), 1);
    final CountDownLatch release = new CountDownLatch(1);

    @AfterEach
    void close() {
        release.countDown();
        System.clearProperty("fsdp4j.ncclIssueOrder");
        backend.close();
    }

    private NcclGroup group(Duration timeout) {
        return new NcclGroup(nccl, 2, timeout, b -> new NcclCallSitesTest.RecordingDevice(nccl, bases, streams));
    }

    /** A stream held at a host function until the test releases it (a peer that never comes, as its stream sees it). */
    private Backend.Stream heldStream(String name) {
        Backend.Stream s = backend.newStream(name);
        s.launchHostFunc(() -> {
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        return s;
    }

    private static void awaitAbort(NcclGroup g, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + millis * 1_000_000L;
        while (!g.isAborted() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
    }

    @Test
    void aCollectiveThatDoesNotCompleteInTimeIsNamedAndEveryCommunicatorAborted() throws Exception {
        NcclGroup g = group(Duration.ofSeconds(1));
        Communicator c = g.communicator(0, backend);
        Backend.Stream held = heldStream("all-gather");
        try (Tensor in = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 4);
             Tensor out = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 8)) {
            long start = System.nanoTime();
            c.allGather(in, out, held);
            awaitAbort(g, 5000);
            double seconds = (System.nanoTime() - start) / 1e9;
            assertTrue(g.isAborted(), "the watchdog fails the group");
            assertTrue(seconds >= 1 && seconds < 3, "after the timeout, not long after: " + seconds + " s");
            String m = g.abortCause().getMessage();
            assertTrue(m.startsWith("allGather #1 on 'world' at rank 0 (cuda:7) did not complete within 1 s"), m);
            assertTrue(nccl.calls.contains("commAbort(100)"), nccl.calls.toString());
            CommException later = assertThrows(CommException.class, () -> c.allGather(in, out, backend.computeStream()));
            assertTrue(later.getMessage().contains("group aborted: allGather #1"), later.getMessage());
        } finally {
            release.countDown();
            held.close();
        }
    }

    @Test
    void aCompletedCollectiveIsNeverTimedOut() throws Exception {
        NcclGroup g = group(Duration.ofMillis(300));
        Communicator c = g.communicator(0, backend);
        try (Tensor x = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 4)) {
            for (int i = 0; i < 5; i++) {
                c.allReduce(x, Reduction.AVG, backend.computeStream());
                Thread.sleep(150);
            }
            Thread.sleep(500);
            assertFalse(g.isAborted(), () -> g.abortCause().getMessage());
        }
    }

    @Test
    void anAsynchronousNcclErrorFailsTheGroupNamingTheCollectiveInFlight() throws Exception {
        NcclGroup g = group(Duration.ofSeconds(60));
        Communicator c = g.communicator(1, backend);
        Backend.Stream held = heldStream("reduce-scatter");
        try (Tensor grad = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 8);
             Tensor shard = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 4)) {
            c.reduceScatter(grad, shard, Reduction.AVG, held);
            nccl.asyncError = 6;           // ncclRemoteError: a peer's process exited
            awaitAbort(g, 5000);
            assertTrue(g.isAborted(), "the watchdog reads NCCL's asynchronous error");
            String m = g.abortCause().getMessage();
            assertTrue(m.startsWith("reduceScatter #1 on 'world' at rank 1 (cuda:7): NCCL reported 'result 6'"), m);
            assertTrue(m.contains("(NCCL: fake transport lost its peer)"), m);
        } finally {
            release.countDown();
            held.close();
        }
    }

    @Test
    void chainedCollectivesRunInIssueOrderAcrossStreams() throws Exception {
        System.setProperty("fsdp4j.ncclIssueOrder", "chained");
        assertTrue(secondWaitsForFirst(), "chained: the second collective's stream waits for the first's");
    }

    @Test
    void underNcclsImplicitOrderTheStreamsDoNotWaitForEachOther() throws Exception {
        System.setProperty("fsdp4j.ncclIssueOrder", "implicit");
        assertFalse(secondWaitsForFirst(), "implicit: NCCL orders the launches, the streams run freely");
    }

    /** Issues a collective on a held stream, then one on a free stream: whether the free stream's next work waited. */
    private boolean secondWaitsForFirst() throws Exception {
        NcclGroup g = group(Duration.ofSeconds(60));
        Communicator gather = g.communicator(0, backend);
        Communicator reduce = gather.split(0, 0, "reduce");
        Backend.Stream held = heldStream("all-gather");
        Backend.Stream free = backend.newStream("reduce-scatter");
        CountDownLatch after = new CountDownLatch(1);
        try (Tensor in = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 4);
             Tensor out = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 8);
             Tensor x = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 4)) {
            gather.allGather(in, out, held);
            reduce.allReduce(x, Reduction.AVG, free);
            free.launchHostFunc(after::countDown);
            boolean ranFreely = after.await(500, TimeUnit.MILLISECONDS);
            release.countDown();
            assertTrue(after.await(5, TimeUnit.SECONDS), "everything runs once the first stream is released");
            return !ranFreely;
        } finally {
            release.countDown();
            held.close();
            free.close();
        }
    }
}
