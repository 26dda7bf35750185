// What happens when a rank fails, never arrives, or calls the wrong collective: every other
// rank ends with an error that names the culprit, within the timeout, and no thread is left
// (whether the ranks meet inside their streams or on the host when they issue).
package org.fsdp4j.comm;

import static org.fsdp4j.comm.CommTestSupport.liveProjectThreads;
import static org.fsdp4j.comm.CommTestSupport.onRanks;
import static org.fsdp4j.comm.CommTestSupport.sync;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.comm.LocalLauncher.RanksFailedException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class LocalGroupFailureTest {

    @AfterEach
    void noThreadIsLeftRunning() throws InterruptedException {
        assertEquals(List.of(), liveProjectThreads());
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void aRankThatNeverArrivesIsNamedAfterTheTimeout(LocalGroup.Dispatch dispatch) {
        LocalGroup group = new LocalGroup(3, Duration.ofMillis(300), dispatch);
        long t0 = System.nanoTime();
        RanksFailedException e = assertThrows(RanksFailedException.class, () -> onRanks(group, (rank, backend, world) -> {
            if (rank == 2) {
                return null;   // leaves without joining the collective
            }
            try (Tensor buf = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
                world.allReduce(buf, Reduction.SUM, backend.computeStream());
                sync(backend);
            }
            return null;
        }));
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
        for (int r = 0; r < 2; r++) {
            Throwable f = e.failures().get(r);
            assertInstanceOf(CommException.class, f);
            assertTrue(f.getMessage().contains("allReduce #1 on 'world'") && f.getMessage().contains("rank 2 did not arrive within 300 ms"),
                    f.getMessage());
        }
        assertNull(e.failures().get(2));
        assertTrue(elapsedMs < 3000, "took " + elapsedMs + " ms");
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void aFailedRankAbortsTheOthersPromptlyAndIsNamed(LocalGroup.Dispatch dispatch) {
        LocalGroup group = new LocalGroup(4, Duration.ofSeconds(60), dispatch);
        long t0 = System.nanoTime();
        RanksFailedException e = assertThrows(RanksFailedException.class, () -> onRanks(group, (rank, backend, world) -> {
            try (Tensor buf = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
                world.allReduce(buf, Reduction.SUM, backend.computeStream());
                sync(backend);         // everyone completes one collective
                if (rank == 1) {
                    throw new IllegalStateException("injected failure");
                }
                world.allReduce(buf, Reduction.SUM, backend.computeStream());
                sync(backend);         // the others wait for rank 1 here
                world.allReduce(buf, Reduction.SUM, backend.computeStream());
                sync(backend);
            }
            return null;
        }));
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
        assertEquals(1, e.firstFailedRank());
        assertTrue(e.getMessage().startsWith("rank 1 failed: IllegalStateException: injected failure"), e.getMessage());
        for (int r : new int[] {0, 2, 3}) {
            String m = e.failures().get(r).getMessage();
            assertTrue(m.contains("allReduce #2 on 'world' at rank " + r) && m.contains("rank 1 failed: IllegalStateException: injected failure"), m);
        }
        assertTrue(elapsedMs < 5000, "the others should stop long before the 60 s timeout; took " + elapsedMs + " ms");
        assertTrue(group.isAborted());
    }

    @Test
    void mismatchedCollectivesNameWhatEachRankCalled() {
        RanksFailedException e = assertThrows(RanksFailedException.class, () -> onRanks(2, (rank, backend, world) -> {
            try (Tensor buf = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 4);
                 Tensor out = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
                if (rank == 0) {
                    world.allGather(buf, out, backend.computeStream());
                } else {
                    world.allReduce(buf, Reduction.AVG, backend.computeStream());
                }
                sync(backend);
            }
            return null;
        }));
        assertTrue(e.getMessage().contains("ranks issued different collectives: rank 0 allGather(fp32, 4), rank 1 allReduce(fp32, 4, avg)"),
                e.getMessage());
    }

    @Test
    void badBuffersAndClosedCommunicatorsFailAtTheCall() {
        onRanks(1, (rank, backend, world) -> {
            try (Tensor a = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 4);
                 Tensor b = backend.zeros(DType.BF16, MemoryCategory.WORKSPACE, 4);
                 Tensor big = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
                assertTrue(assertThrows(IllegalArgumentException.class, () -> world.allGather(a, b, backend.computeStream())).getMessage()
                        .contains("input is fp32 but output is bf16"));
                assertTrue(assertThrows(IllegalArgumentException.class, () -> world.allGather(a, big, backend.computeStream())).getMessage()
                        .contains("output has 8 elements, expected 1 × 4"));
                assertThrows(IllegalArgumentException.class, () -> world.broadcast(a, 1, backend.computeStream()));
                world.close();
                assertThrows(IllegalStateException.class, () -> world.barrier(backend.computeStream()));
            }
            return null;
        });
    }
}
