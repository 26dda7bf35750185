// The trainer as one process of several: two "processes" of this JVM (each a real ProcessGroup
// with its store connection and sockets, TcpTestSupport's way) each train their two of four
// ranks and reproduce the losses of four in-process ranks bit for bit (the TCP group reduces in
// the in-process group's order and rounds the same way), for full_shard in fp32 and for
// hybrid_shard (shard groups inside a process, the replicate all-reduce across them) in bf16.
// A stop asked of one process stops both after the same step. The same with real child JVMs
// started by `fsdp4j launch` is MultiProcessCommandTest (samples).
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
import org.fsdp4j.api.DType;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;
import org.fsdp4j.dist.Settings;
import org.fsdp4j.model.GptConfig;
import org.junit.jupiter.api.Test;

class MultiProcessTrainerTest {

    private static final GptConfig SMALL = new GptConfig(256, 32, 2, 2, 30);
    private static final long SEED = System.nanoTime();

    private static TrainConfig.Builder config() {
        return TrainConfig.builder().preset("test").model(SMALL).steps(4).batchSize(8).seqLen(32).lr(3e-3f).seed(SEED)
                .device("cpu").cpuThreads(1).worldSize(4).collectiveTimeout(Duration.ofSeconds(30));
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

    private static float[] inProcess(TrainConfig c) {
        try (Trainer t = new Trainer(c, line -> { })) {
            return t.run(r -> { }).losses();
        }
    }

    @Test
    void twoProcessesOfTwoRanksTrainExactlyAsFourInProcessRanks() throws Exception {
        for (TrainConfig c : new TrainConfig[] {
                config().build(),
                config().strategy(ShardingStrategy.HYBRID_SHARD).shardGroupSize(2).paramDtype(DType.BF16).build()}) {
            float[] expected = inProcess(c);
            List<float[]> got = asProcesses(2, c, (p, pg) -> {
                try (Trainer t = new Trainer(c, line -> { }, pg)) {
                    TrainSummary s = t.run(r -> { });
                    assertEquals(2, s.commBytesPerRank().length, "each process reports its own ranks");
                    return s.losses();
                }
            });
            for (int p = 0; p < 2; p++) {
                assertArrayEquals(expected, got.get(p), c.strategy() + " " + c.precision() + ", process " + p
                        + " (seed " + SEED + ")");
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
}
