// Checkpoints of a run over several processes, with two "processes" of this JVM (each a real
// ProcessGroup with its own store connections, as MultiProcessTrainerTest's): each saves its own
// ranks into the one --save-dir and process 0 commits, so the checkpoint is the very one four
// in-process ranks write (the same index.json, the same bytes in every rank file, nothing else
// left behind), and resuming from it at 2 processes × 2 ranks continues bit for bit. A --save-dir
// that is not one directory for both (here: each process its own) fails both processes promptly,
// whichever side cannot see the other's files, the one that cannot see with one line naming the
// directory and the fix, the other naming that process and the save; nothing is committed.
package org.fsdp4j.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BiFunction;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;
import org.fsdp4j.dist.Settings;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.train.CheckpointOptions;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.TrainSummary;
import org.fsdp4j.train.Trainer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SharedCheckpointTest {

    private static final GptConfig MODEL = new GptConfig(256, 32, 2, 2, 30);   // 30 wide: odd shard splits
    private static final int COLLECTIVE_TIMEOUT_S = 30;

    @TempDir
    Path dir;

    private static TrainConfig config(int steps) {
        return TrainConfig.builder().preset("test").model(MODEL).steps(steps).batchSize(8).seqLen(32).fsdp(f -> f.lr(3e-3f))
                .fsdp(f -> f.seed(77).device("cpu").cpuThreads(1).worldSize(4))
                .fsdp(f -> f.collectiveTimeout(Duration.ofSeconds(COLLECTIVE_TIMEOUT_S))).build();
    }

    /** What each simulated process returns, or the exception it ended with. */
    private record Outcome<T>(T value, Throwable failure) {
    }

    /** Runs {@code body} as each of two processes of one run (2 ranks each), on a thread each. */
    private static <T> List<Outcome<T>> asTwoProcesses(TrainConfig c, BiFunction<Integer, ProcessGroup, T> body)
            throws InterruptedException {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (int p = 0; p < 2; p++) {
                ProcessIdentity id = new ProcessIdentity(p, 2, p, 2, 0, "127.0.0.1", port, "a test");
                int process = p;
                futures.add(pool.submit(() -> {
                    try (ProcessGroup pg = ProcessGroup.join(id, Settings.of(c, Set.of("outDir", "cpuThreads")),
                            Duration.ofSeconds(30))) {
                        try {
                            return body.apply(process, pg);
                        } catch (RuntimeException | Error e) {
                            pg.fail(String.valueOf(e.getMessage()));     // as the command line does
                            throw e;
                        }
                    }
                }));
            }
            List<Outcome<T>> out = new ArrayList<>();
            for (Future<T> f : futures) {
                try {
                    out.add(new Outcome<>(f.get(), null));
                } catch (ExecutionException e) {
                    out.add(new Outcome<>(null, e.getCause()));
                }
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    private static CheckpointOptions saving(Path saveDir, int every) {
        return new CheckpointOptions(every, Optional.of(saveDir), 5, Optional.empty());
    }

    @Test
    void twoProcessesCommitTheCheckpointFourInProcessRanksWriteAndItResumesExactly() throws Exception {
        TrainConfig c = config(4);
        Path alone = dir.resolve("one-process");
        float[] expected;
        try (Trainer t = new Trainer(c, saving(alone, 2), line -> { })) {
            expected = t.run(r -> { }).losses();
        }

        Path shared = dir.resolve("shared");
        List<Outcome<TrainSummary>> runs = asTwoProcesses(c, (p, pg) -> {
            try (Trainer t = new Trainer(c, saving(shared, 2), line -> { }, pg)) {
                t.run(r -> { });
                t.awaitCheckpoints();           // as the command line does before its summary
                return t.summary();
            }
        });
        for (int p = 0; p < 2; p++) {
            Outcome<TrainSummary> o = runs.get(p);
            assertEquals(null, o.failure(), "process " + p);
            assertArrayEquals(expected, o.value().losses(), "process " + p);
            assertEquals(List.of(shared.resolve("step-00000002"), shared.resolve("step-00000004")),
                    o.value().checkpoints().stream().map(Checkpointer.Save::dir).toList(),
                    "process " + p + "'s saves end with the commit");
        }
        assertEquals(List.of(shared.resolve("step-00000002"), shared.resolve("step-00000004")), Checkpointer.complete(shared));
        for (String step : List.of("step-00000002", "step-00000004")) {
            ObjectMapper json = new ObjectMapper();
            assertEquals(json.readTree(alone.resolve(step).resolve(CheckpointIndex.FILE_NAME).toFile()),
                    json.readTree(shared.resolve(step).resolve(CheckpointIndex.FILE_NAME).toFile()), step + "'s index");
            assertEquals(fileNames(alone.resolve(step)), fileNames(shared.resolve(step)), step + ": no part files left");
            for (String f : fileNames(alone.resolve(step))) {
                assertArrayEquals(Files.readAllBytes(alone.resolve(step).resolve(f)),
                        Files.readAllBytes(shared.resolve(step).resolve(f)), step + "/" + f);
            }
        }
        assertEquals(List.of("step-00000002", "step-00000004"), fileNames(shared), "no partial directory left");

        Path from = shared.resolve("step-00000002");
        List<Outcome<float[]>> resumed = asTwoProcesses(c, (p, pg) -> {
            try (Trainer t = new Trainer(c, new CheckpointOptions(0, Optional.empty(), 1, Optional.of(from.toString())),
                    line -> { }, pg)) {
                assertEquals(2, t.resumedFrom().orElseThrow().step());
                return t.run(r -> { }).losses();
            }
        });
        for (int p = 0; p < 2; p++) {
            assertEquals(null, resumed.get(p).failure(), "process " + p);
            assertArrayEquals(expected, resumed.get(p).value(), "process " + p + " resumed at step 2: steps 3-4 exact");
        }
    }

    private static List<String> fileNames(Path d) throws IOException {
        try (var list = Files.list(d)) {
            return list.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    /** Two processes whose --save-dir differs ({@code saveDirOf}); returns each one's failure after checking both failed in time. */
    private List<Throwable> failingSave(java.util.function.IntFunction<Path> saveDirOf) throws Exception {
        TrainConfig c = config(3);
        long start = System.nanoTime();
        List<Outcome<TrainSummary>> runs = asTwoProcesses(c, (p, pg) -> {
            try (Trainer t = new Trainer(c, saving(saveDirOf.apply(p), 2), line -> { }, pg)) {
                TrainSummary s = t.run(r -> { });
                t.awaitCheckpoints();
                return s;
            }
        });
        double seconds = (System.nanoTime() - start) / 1e9;
        assertTrue(seconds < COLLECTIVE_TIMEOUT_S, "both processes end promptly, not at their timeout: " + seconds + " s");
        List<Throwable> failures = runs.stream().map(Outcome::failure).toList();
        assertTrue(failures.stream().allMatch(f -> f != null), "both processes fail: " + runs);
        failures.forEach(f -> assertEquals(1, f.getMessage().lines().count(), f.getMessage()));
        assertEquals(List.of(), Checkpointer.complete(saveDirOf.apply(0)), "nothing committed");
        return failures;
    }

    @Test
    void aProcessThatCannotSeeTheDirectoryProcessZeroCreatedFailsBothProcesses() throws Exception {
        Path d0 = dir.resolve("node0");
        Path d1 = dir.resolve("node1");
        List<Throwable> failures = failingSave(p -> p == 0 ? d0 : d1);
        String host = host();
        Throwable cannotSee = failures.get(1);
        assertInstanceOf(SaveDirNotSharedException.class, cannotSee);
        assertEquals("--save-dir " + d1 + " must be a directory every process sees (a filesystem shared by every node):"
                + " process 1 (ranks 2-3, host " + host + ") cannot see .step-00000002.partial-" + ProcessHandle.current().pid()
                + ", which process 0 (ranks 0-1, host " + host + ") created there; give every process the same shared"
                + " --save-dir", cannotSee.getMessage());
        Throwable other = failures.get(0);
        assertInstanceOf(CommException.class, other);
        assertTrue(other.getMessage().startsWith("process 1 (ranks 2-3, host " + host + ") failed: "
                + cannotSee.getMessage() + ", during the save of step 2 (not committed"), other.getMessage());
    }

    @Test
    void processZeroThatCannotSeeAnotherProcesssFilesFailsBothProcesses() throws Exception {
        Path d0 = dir.resolve("node0");
        Path d1 = dir.resolve("node1");
        String partial = ".step-00000002.partial-" + ProcessHandle.current().pid();
        Files.createDirectories(d1.resolve(partial));      // process 1 finds "the" directory, on its own disk
        List<Throwable> failures = failingSave(p -> p == 0 ? d0 : d1);
        String host = host();
        Throwable cannotSee = failures.get(0);
        assertInstanceOf(SaveDirNotSharedException.class, cannotSee);
        assertEquals("--save-dir " + d0 + " must be a directory every process sees (a filesystem shared by every node):"
                + " process 0 (ranks 0-1, host " + host + ") cannot see process-00001.json as process 1 (ranks 2-3, host "
                + host + ") wrote it into " + partial + " (it is not there); give every process the same shared --save-dir",
                cannotSee.getMessage());
        assertTrue(!Files.exists(d0.resolve(partial)), "process 0 removes the save that cannot commit");
        Throwable other = failures.get(1);
        assertInstanceOf(CommException.class, other);
        assertTrue(other.getMessage().startsWith("process 0 (ranks 0-1, host " + host + ") failed: "
                + cannotSee.getMessage() + ", during the save of step 2 (not committed"), other.getMessage());
    }

    /** ProcessGroup's name for this machine in messages. */
    private static String host() {
        try {
            return java.net.InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return "unknown host";
        }
    }

    @Test
    void everyProcessResumesFromTheCheckpointProcessZeroNamesOrSaysItCannotSeeIt() throws Exception {
        TrainConfig c = config(2);
        Path shared = dir.resolve("shared");
        try (Trainer t = new Trainer(c, saving(shared, 1), line -> { })) {
            t.run(r -> { });
        }
        Path empty = dir.resolve("elsewhere");
        Files.createDirectories(empty);
        TrainConfig longer = config(3);
        List<Outcome<Integer>> runs = asTwoProcesses(longer, (p, pg) -> {
            List<String> log = new ArrayList<>();
            try (Trainer t = new Trainer(longer, new CheckpointOptions(0, Optional.of(p == 0 ? shared : empty), 1,
                    Optional.of("latest")), log::add, pg)) {
                return t.resumedFrom().orElseThrow().step();
            }
        });
        if (runs.get(0).failure() == null) {
            assertEquals(2, runs.get(0).value(), "process 0 resumes from the latest, step 2");
        } else {                            // or it was stopped by process 1's failure
            assertInstanceOf(CommException.class, runs.get(0).failure());
            assertTrue(runs.get(0).failure().getMessage().contains("process 1 (ranks 2-3, host "), runs.get(0).toString());
        }
        Throwable cannotSee = runs.get(1).failure();
        assertInstanceOf(SaveDirNotSharedException.class, cannotSee);
        String host = host();
        assertEquals("--save-dir " + empty + " must be a directory every process sees (a filesystem shared by every node):"
                + " process 1 (ranks 2-3, host " + host + ") cannot see " + empty.resolve("step-00000002") + ", which"
                + " process 0 (ranks 0-1, host " + host + ") resumes from; give every process the same shared --save-dir",
                cannotSee.getMessage());
    }
}
