// The trainer as one process of several: two "processes" of this JVM (each a real ProcessGroup
// with its store connection and sockets, TcpTestSupport's way) each train their two of four
// ranks and reproduce the losses of four in-process ranks bit for bit (the TCP group reduces in
// the in-process group's order and rounds the same way), for full_shard in fp32 and for
// hybrid_shard (shard groups inside a process, the replicate all-reduce across them) in bf16,
// and their summaries hold all four ranks' memory and traffic, as the in-process run's do.
// A stop asked of one process stops both after the same step. With scripted ranks whose memory
// differs by rank, process 0 reports every rank's figures: per step (the maxima over all ranks)
// when it writes metrics, in the memory check, and in the summary's per-rank arrays; a process
// that fails before the end makes the other's pooling fail at once, and that summary then holds
// its own ranks, saying which. The same with real child JVMs started by `fsdp4j launch` is
// MultiProcessCommandTest (samples).
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BiFunction;
import java.nio.file.Path;
import java.util.Optional;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;
import org.fsdp4j.dist.Settings;
import org.fsdp4j.model.GptConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MultiProcessTrainerTest {

    private static final GptConfig SMALL = new GptConfig(256, 32, 2, 2, 30);
    private static final long SEED = System.nanoTime();

    private static TrainConfig.Builder config() {
        return TrainConfig.builder().preset("test").model(SMALL).steps(4).batchSize(8).seqLen(32).fsdp(f -> f.lr(3e-3f).seed(SEED))
                .fsdp(f -> f.device("cpu").cpuThreads(1).worldSize(4).collectiveTimeout(Duration.ofSeconds(30)));
    }

    /** Runs {@code body} as each of {@code processes} processes of one run, on a thread each; results by process. */
    private static <T> List<T> asProcesses(int processes, TrainConfig c, BiFunction<Integer, ProcessGroup, T> body)
            throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        ExecutorService pool = Executors.newFixedThreadPool(processes);
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (int p = 0; p < processes; p++) {
                ProcessIdentity id = new ProcessIdentity(p, processes, p, processes, 0, "127.0.0.1", port, "a test");
                int process = p;
                futures.add(pool.submit(() -> {
                    try (ProcessGroup pg = ProcessGroup.join(id, Settings.of(c, Set.of("outDir", "cpuThreads")),
                            Duration.ofSeconds(30))) {
                        return body.apply(process, pg);
                    }
                }));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : futures) {
                out.add(f.get());
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    private static TrainSummary inProcess(TrainConfig c) {
        try (Trainer t = new Trainer(c, line -> { })) {
            return t.run(r -> { });
        }
    }

    @Test
    void twoProcessesOfTwoRanksTrainExactlyAsFourInProcessRanks() throws Exception {
        for (TrainConfig c : new TrainConfig[] {
                config().build(),
                config().fsdp(f -> f.strategy(ShardingStrategy.HYBRID_SHARD).shardGroupSize(2).paramDtype(DType.BF16)).build()}) {
            TrainSummary expected = inProcess(c);
            List<TrainSummary> got = asProcesses(2, c, (p, pg) -> {
                try (Trainer t = new Trainer(c, line -> { }, pg)) {
                    return t.run(r -> { });
                }
            });
            for (int p = 0; p < 2; p++) {
                String what = c.fsdp().strategy() + " " + c.fsdp().precision() + ", process " + p + " (seed " + SEED + ")";
                TrainSummary s = got.get(p);
                assertArrayEquals(expected.losses(), s.losses(), what);
                // every process's summary holds the four ranks, in rank order; the bytes each keeps and
                // sends do not depend on which process it runs in
                assertArrayEquals(expected.persistentBytesPerRank(), s.persistentBytesPerRank(), what);
                assertArrayEquals(expected.commBytesPerRank(), s.commBytesPerRank(), what);
                assertArrayEquals(expected.peakBytesByCategory().get("params"), s.peakBytesByCategory().get("params"), what);
                assertArrayEquals(expected.memoryCheck().measuredPersistentBytesPerRank(),
                        s.memoryCheck().measuredPersistentBytesPerRank(), what);
                assertEquals(4, s.peakBytesPerRank().length, what);
                assertEquals(4, s.memoryCheck().measuredPeakBytesPerRank().length, what);
                assertNull(s.ranksInPerRankArrays(), what);
            }
        }
    }

    @Test
    void aStopAskedOfOneProcessStopsBothAfterTheSameStep() throws Exception {
        TrainConfig c = config().steps(50).build();
        List<Integer> stepsRun = asProcesses(2, c, (p, pg) -> {
            try (Trainer t = new Trainer(c, line -> { }, pg)) {
                TrainSummary s = t.run(r -> {
                    if (p == 1 && r.step() == 2) {
                        t.requestStop("SIGTERM");
                    }
                });
                assertTrue(s.outcome().interrupted());
                assertEquals("SIGTERM", s.outcome().interruptedBy());
                return s.steps();
            }
        });
        // asked after step 2's boundary had been agreed: both stop at the next one
        assertEquals(List.of(3, 3), stepsRun);
    }

    /**
     * K ranks of one process, scripted: global rank r keeps 1000·(r + 1) bytes of parameters, its
     * activations peak at 10000·(r + 1)·step bytes in a step, it sends 100·(r + 1) bytes, and the
     * process's host waits 1 + p times a step with p + 1 promoted copies. Votes as a real process.
     */
    private static final class ScriptedRanks implements StepExecutor {
        private final ProcessGroup group;
        private final int firstRank;
        private final List<MemoryTracker> trackers = new ArrayList<>();

        ScriptedRanks(ProcessGroup group, int ranksHere) {
            this.group = group;
            this.firstRank = group.identity().rank() * ranksHere;
            for (int l = 0; l < ranksHere; l++) {
                MemoryTracker t = new MemoryTracker("rank " + (firstRank + l));
                t.allocated(MemoryCategory.PARAMS, 1000L * (firstRank + l + 1));
                trackers.add(t);
            }
        }

        @Override
        public StepMetrics step(Batch batch, int step, float lr) {
            for (int l = 0; l < trackers.size(); l++) {
                long activations = 10_000L * (firstRank + l + 1) * step;
                trackers.get(l).allocated(MemoryCategory.ACTIVATIONS, activations);
                trackers.get(l).freed(MemoryCategory.ACTIVATIONS, activations);
            }
            int p = group.identity().rank();
            return new StepMetrics(3f, 1.0, false, 1f, 1 + p, p + 1,
                    java.util.stream.LongStream.range(0, trackers.size()).map(l -> 100 * (firstRank + l + 1)).toArray());
        }

        /** Every scripted step's loss is 3: so is the held-out one. */
        @Override
        public float evaluate(Batch batch) {
            return 3f;
        }

        @Override
        public Optional<ProcessGroup> processGroup() {
            return Optional.of(group);
        }

        @Override
        public long parameterCount() {
            return SMALL.parameterCount();
        }

        @Override
        public int worldSize() {
            return 4;
        }

        @Override
        public String backendName() {
            return "scripted";
        }

        @Override
        public List<MemoryTracker> memoryTrackers() {
            return trackers;
        }

        @Override
        public void close() {
        }
    }

    /** Rank r's peak in step s of ScriptedRanks: its parameters and that step's activations. */
    private static long scriptedPeak(int rank, int step) {
        return 1000L * (rank + 1) + 10_000L * (rank + 1) * step;
    }

    @Test
    void processZeroReportsEveryRanksFiguresPerStepAndInTheSummary(@TempDir Path out) throws Exception {
        TrainConfig c = config().steps(3).build();
        List<List<StepResult>> steps = asProcesses(2, c, (p, pg) -> {
            TrainConfig mine = p == 0 ? c.toBuilder().outDir(out).build() : c;      // process 0 writes metrics
            List<StepResult> results = new ArrayList<>();
            try (Trainer t = new Trainer(mine, line -> { }, (cc, d) -> new ScriptedRanks(pg, 2))) {
                TrainSummary s = t.run(results::add);
                String what = "process " + p;
                assertArrayEquals(new long[] {1000, 2000, 3000, 4000}, s.persistentBytesPerRank(), what);
                assertArrayEquals(new long[] {scriptedPeak(0, 3), scriptedPeak(1, 3), scriptedPeak(2, 3),
                    scriptedPeak(3, 3)}, s.peakBytesPerRank(), what);
                assertArrayEquals(new long[] {10_000 * 3, 20_000 * 3, 30_000 * 3, 40_000 * 3},
                        s.bytesAtPeakByCategory().get("activations"), what);
                assertArrayEquals(new long[] {100, 200, 300, 400}, s.commBytesPerRank(), what);
                assertArrayEquals(new long[] {scriptedPeak(0, 1), scriptedPeak(1, 1), scriptedPeak(2, 1),
                    scriptedPeak(3, 1)}, s.memoryCheck().measuredPeakBytesPerRank(), what);
                assertEquals(2, s.hostSyncsPerStep(), what + ": the most over the processes");
                assertEquals(3 * (1 + 2), s.promotedCopies(), what + ": summed over the processes");
                assertNull(s.ranksInPerRankArrays(), what);
                if (p == 0) {
                    assertArrayEquals(new long[] {1000, 2000, 3000, 4000},
                            t.memoryCheck().orElseThrow().measuredPersistentBytesPerRank());
                }
            }
            return results;
        });
        List<StepResult> reported = steps.get(0);
        assertEquals(3, reported.size());
        for (StepResult r : reported) {
            // rank 3, in process 1, has the largest figures of every step
            assertEquals(scriptedPeak(3, r.step()), r.peakBytes(), "step " + r.step());
            assertEquals(4000, r.peakSplit().get(MemoryCategory.PARAMS), "step " + r.step());
            assertEquals(40_000L * r.step(), r.peakSplit().get(MemoryCategory.ACTIVATIONS), "step " + r.step());
            assertEquals(4000, r.liveBytes(), "step " + r.step());
            assertEquals(400, r.commBytes(), "step " + r.step());
            assertEquals(2, r.hostSyncs(), "step " + r.step());
            assertEquals(1 + 2, r.promotedCopies(), "step " + r.step());
        }
    }

    @Test
    void withoutMetricsTheStepsReportProcessZerosRanksButTheMemoryCheckEveryRank() throws Exception {
        TrainConfig c = config().steps(3).build();
        List<List<StepResult>> steps = asProcesses(2, c, (p, pg) -> {
            List<StepResult> results = new ArrayList<>();
            try (Trainer t = new Trainer(c, line -> { }, (cc, d) -> new ScriptedRanks(pg, 2))) {
                t.run(r -> {
                    results.add(r);
                    if (p == 0 && r.step() == 1) {
                        assertArrayEquals(new long[] {scriptedPeak(0, 1), scriptedPeak(1, 1), scriptedPeak(2, 1),
                            scriptedPeak(3, 1)}, t.memoryCheck().orElseThrow().measuredPeakBytesPerRank(),
                                "the memory check after the first step compares every rank");
                    }
                });
            }
            return results;
        });
        for (StepResult r : steps.get(0)) {
            assertEquals(scriptedPeak(1, r.step()), r.peakBytes(), "step " + r.step() + ": process 0's ranks, no --out");
            assertEquals(200, r.commBytes(), "step " + r.step());
        }
    }

    @Test
    void aProcessThatFailsBeforeTheEndFailsTheOthersPoolingAtOnceAndTheirSummaryNamesItsRanks() throws Exception {
        TrainConfig c = config().steps(3).fsdp(f -> f.collectiveTimeout(Duration.ofSeconds(30))).build();
        List<TrainSummary> left = asProcesses(2, c, (p, pg) -> {
            try (Trainer t = new Trainer(c, line -> { }, (cc, d) -> new ScriptedRanks(pg, 2))) {
                if (p == 1) {
                    IllegalStateException e = assertThrows(IllegalStateException.class, () -> t.run(r -> {
                        if (r.step() == 3) {
                            throw new IllegalStateException("disk full");
                        }
                    }));
                    pg.fail(e.getMessage());            // as the command line does
                    return null;
                }
                long start = System.nanoTime();
                CommException e = assertThrows(CommException.class, () -> t.run(r -> { }));
                double seconds = (System.nanoTime() - start) / 1e9;
                assertTrue(seconds < 10, "took " + seconds + " s; the timeout is 30 s");
                assertTrue(e.getMessage().contains("disk full"), e.getMessage());
                return t.summary();
            }
        });
        TrainSummary s = left.get(0);
        assertEquals(3, s.steps());
        assertArrayEquals(new int[] {0, 1}, s.ranksInPerRankArrays(), "process 0's own ranks");
        assertArrayEquals(new long[] {1000, 2000}, s.persistentBytesPerRank());
        assertEquals(2, s.memoryCheck().measuredPeakBytesPerRank().length);
        assertNotNull(s.outcome().failure());
        assertTrue(org.fsdp4j.metrics.JsonFiles.toJson(s).contains("\"ranks_in_per_rank_arrays\""));
    }
}
