// RankThreads: every run of a group goes to the same thread per rank (so what a rank's thread
// holds lasts across steps), results come back in rank order, a failing rank is named and the
// threads serve the next run, a hung rank is reported and makes later runs refuse, and closing
// ends every thread.
package org.fsdp4j.comm;

import static org.fsdp4j.comm.CommTestSupport.liveProjectThreads;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.fsdp4j.comm.LocalLauncher.RanksFailedException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class RankThreadsTest {

    @AfterEach
    void noThreadIsLeftRunning() throws InterruptedException {
        assertEquals(List.of(), liveProjectThreads());
    }

    @Test
    void everyRunOfARankGoesToTheSameThread() {
        ThreadLocal<Integer> runsSeen = ThreadLocal.withInitial(() -> 0);
        try (RankThreads threads = new RankThreads(new LocalGroup(3, Duration.ofSeconds(5)))) {
            List<Thread> first = threads.run(r -> Thread.currentThread());
            for (int step = 1; step <= 3; step++) {
                assertEquals(first, threads.run(r -> Thread.currentThread()));
                List<Integer> seen = threads.run(r -> {
                    runsSeen.set(runsSeen.get() + 1);
                    return runsSeen.get();
                });
                assertEquals(List.of(step, step, step), seen, "a rank's thread keeps its thread-locals across runs");
            }
            assertEquals(List.of("fsdp4j-rank-0", "fsdp4j-rank-1", "fsdp4j-rank-2"),
                    first.stream().map(Thread::getName).toList());
            assertEquals(List.of(0, 10, 20), threads.run(r -> 10 * r), "results in rank order");
        }
    }

    @Test
    void aFailingRankIsNamedAndTheThreadsServeTheNextRun() {
        try (RankThreads threads = new RankThreads(new LocalGroup(2, Duration.ofSeconds(5)))) {
            RanksFailedException e = assertThrows(RanksFailedException.class, () -> threads.run(r -> {
                if (r == 1) {
                    throw new IllegalArgumentException("bad shard on rank 1");
                }
                return r;
            }));
            assertEquals(1, e.firstFailedRank());
            assertTrue(e.getMessage().startsWith("rank 1 failed: IllegalArgumentException: bad shard on rank 1"),
                    e.getMessage());
            assertInstanceOf(IllegalArgumentException.class, e.getCause());
            assertEquals(List.of(0, 1), threads.run(r -> r));
        }
    }

    @Test
    void aRunInsideARunIsRefused() {
        try (RankThreads threads = new RankThreads(new LocalGroup(2, Duration.ofSeconds(5)))) {
            RanksFailedException e = assertThrows(RanksFailedException.class, () -> threads.run(r -> threads.run(q -> q)));
            assertInstanceOf(IllegalStateException.class, e.getCause());
            assertTrue(e.getCause().getMessage().contains("already in progress"), e.getCause().getMessage());
        }
    }

    @Test
    void aHungRankIsReportedAndLaterRunsRefuse() throws InterruptedException {
        CountDownLatch release = new CountDownLatch(1);
        RankThreads threads = new RankThreads(new LocalGroup(2, Duration.ofMillis(100)));
        try {
            RanksFailedException e = assertThrows(RanksFailedException.class, () -> threads.run(r -> {
                if (r == 0) {
                    release.await();
                }
                return r;
            }));
            assertEquals(-1, e.firstFailedRank());
            assertTrue(e.getMessage().contains("ranks still running after 400 ms: [0]"), e.getMessage());
            IllegalStateException again = assertThrows(IllegalStateException.class, () -> threads.run(r -> r));
            assertTrue(again.getMessage().contains("ranks [0] of this process hung"), again.getMessage());
        } finally {
            threads.close();
            release.countDown();      // the lost thread's work returns, and it reads the stop left for it
        }
    }

    @Test
    void closedThreadsRefuseToRun() {
        RankThreads threads = new RankThreads(new LocalGroup(2, Duration.ofSeconds(5)));
        threads.close();
        threads.close();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> threads.run(r -> r));
        assertEquals("the rank threads were closed", e.getMessage());
    }
}
