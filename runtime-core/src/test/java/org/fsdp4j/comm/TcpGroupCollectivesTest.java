// The TCP group's collectives between "processes" of this JVM (TcpTestSupport: real stores,
// listeners and sockets), on CPU buffers: every op bit for bit as the in-process group computes
// it ("fp32 sum in member order, rounded once": what makes 2 processes × 2 ranks train exactly as
// 4 in-process ranks), messages of several frames, the sub-groups of a 2-D mesh within and across
// processes, the ring byte counts, and the failures a user meets: ranks that disagree on the
// collective (both sides named), a rank that never arrives (the watchdog names it), a peer whose
// connection dies (named, promptly). Here the processes of this host may use shared-memory rings;
// TcpGroupOverTcpCollectivesTest runs every case again with every byte over TCP.
package org.fsdp4j.comm;

import static org.fsdp4j.comm.CommTestSupport.randomPerRank;
import static org.fsdp4j.comm.CommTestSupport.reduceLikeTheGroup;
import static org.fsdp4j.comm.CommTestSupport.tensorOf;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.junit.jupiter.api.Test;

class TcpGroupCollectivesTest {

    /** Whether the groups may put the bytes between processes into shared-memory rings. */
    boolean sharedMemory() {
        return true;
    }

    private static final Duration TIMEOUT = Duration.ofSeconds(20);

    private final long seed = System.nanoTime();
    private final Random random = new Random(seed);

    /** (processes, world size): one rank per process, two per process, three processes. */
    private static final int[][] LAYOUTS = {{2, 2}, {2, 4}, {3, 3}};

    @Test
    void allGatherConcatenatesEveryRanksInputExactly() {
        for (int[] layout : LAYOUTS) {
            int n = layout[1];
            for (DType dtype : List.of(DType.F32, DType.BF16)) {
                int shard = 37;
                float[][] data = randomPerRank(random, n, shard, dtype);
                List<float[]> out = TcpTestSupport.onRanks(layout[0], n, TIMEOUT, sharedMemory(), (rank, backend, world) -> {
                    try (Tensor in = tensorOf(backend, dtype, data[rank]);
                         Tensor gathered = backend.allocate(dtype, MemoryCategory.GATHERED, (long) n * shard)) {
                        world.allGather(in, gathered, backend.computeStream());
                        return backend.toHost(gathered);
                    }
                });
                for (int r = 0; r < n; r++) {
                    for (int q = 0; q < n; q++) {
                        assertArrayEquals(data[q], Arrays.copyOfRange(out.get(r), q * shard, (q + 1) * shard),
                                "rank " + r + " chunk " + q + " " + Arrays.toString(layout) + " " + dtype);
                    }
                }
            }
        }
    }

    @Test
    void reduceScatterAndAllReduceGiveTheInProcessGroupsBits() {
        for (int[] layout : LAYOUTS) {
            int n = layout[1];
            for (DType dtype : List.of(DType.F32, DType.BF16, DType.F16)) {
                for (Reduction red : List.of(Reduction.SUM, Reduction.AVG, Reduction.fp16Average(n))) {
                    int shard = 29;
                    int numel = 50;      // all-reduce chunks of uneven length
                    float[][] data = randomPerRank(random, n, n * shard, dtype);
                    float[][] buf = randomPerRank(random, n, numel, dtype);
                    List<float[][]> out = TcpTestSupport.onRanks(layout[0], n, TIMEOUT, sharedMemory(), (rank, backend, world) -> {
                        try (Tensor in = tensorOf(backend, dtype, data[rank]);
                             Tensor shardOut = backend.allocate(dtype, MemoryCategory.GRADS, shard);
                             Tensor b = tensorOf(backend, dtype, buf[rank])) {
                            world.reduceScatter(in, shardOut, red, backend.computeStream());
                            world.allReduce(b, red, backend.computeStream());
                            return new float[][] {backend.toHost(shardOut), backend.toHost(b)};
                        }
                    });
                    String ctx = Arrays.toString(layout) + " " + dtype + " " + red + " seed " + seed;
                    float scale = (float) red.scaleAfterSum(n);
                    for (int r = 0; r < n; r++) {
                        for (int i = 0; i < shard; i++) {
                            assertEquals(reduceLikeTheGroup(data, r * shard + i, scale, dtype), out.get(r)[0][i], 0f, ctx);
                        }
                        for (int i = 0; i < numel; i++) {
                            assertEquals(reduceLikeTheGroup(buf, i, scale, dtype), out.get(r)[1][i], 0f, ctx + " element " + i);
                        }
                    }
                }
            }
        }
    }

    @Test
    void processesOfThisHostShareMemoryOnlyWhereBothAllowIt() {
        // process 2 refuses shared memory: its pairs go over TCP, the pair 0–1 through rings where this group allows them
        float[][] data = randomPerRank(random, 3, 1000, DType.F32);
        List<float[]> sums = new java.util.concurrent.CopyOnWriteArrayList<>();
        List<Integer> ringPeers = TcpTestSupport.onProcesses(3, 3, TIMEOUT, sharedMemory(), (pg, group) -> {
            if (pg.process() == 2) {
                group.sharedMemory(false);
            }
            return LocalLauncher.run(group, rank -> {
                try (Backend backend = Backends.create(Device.CPU, new MemoryTracker("rank " + rank), new BackendOptions(1, true));
                     Communicator world = group.communicator(rank, backend);
                     Tensor b = tensorOf(backend, DType.F32, data[rank])) {
                    world.allReduce(b, Reduction.SUM, backend.computeStream());
                    sums.add(backend.toHost(b));
                    return ((TcpCommunicator) world).sharedMemoryPeers();
                }
            });
        });
        int pair = sharedMemory() && java.nio.file.Files.isDirectory(java.nio.file.Path.of("/dev/shm")) ? 1 : 0;
        assertEquals(List.of(pair, pair, 0), ringPeers);
        for (float[] got : sums) {
            for (int i = 0; i < got.length; i++) {
                assertEquals(reduceLikeTheGroup(data, i, 1f, DType.F32), got[i], 0f, "element " + i);
            }
        }
    }

    @Test
    void messagesOfSeveralFramesArriveWhole() {
        int n = 2;
        int shard = (Wire.MAX_FRAME_BYTES / 4) + 12345;   // each rank's chunk takes two frames
        float[][] data = randomPerRank(random, n, n * shard, DType.F32);
        List<float[][]> out = TcpTestSupport.onRanks(2, n, TIMEOUT, sharedMemory(), (rank, backend, world) -> {
            try (Tensor in = tensorOf(backend, DType.F32, data[rank]);
                 Tensor mine = backend.allocate(DType.F32, MemoryCategory.GRADS, shard);
                 Tensor gathered = backend.allocate(DType.F32, MemoryCategory.GATHERED, (long) n * shard)) {
                world.reduceScatter(in, mine, Reduction.SUM, backend.computeStream());
                world.allGather(mine, gathered, backend.computeStream());
                world.allReduce(in, Reduction.AVG, backend.computeStream());
                return new float[][] {backend.toHost(gathered), backend.toHost(in)};
            }
        });
        for (int i = 0; i < n * shard; i += 997) {
            float sum = reduceLikeTheGroup(data, i, 1f, DType.F32);
            float avg = reduceLikeTheGroup(data, i, 0.5f, DType.F32);
            for (int r = 0; r < n; r++) {
                assertEquals(sum, out.get(r)[0][i], 0f, "gathered sum at " + i);
                assertEquals(avg, out.get(r)[1][i], 0f, "average at " + i);
            }
        }
    }

    @Test
    void broadcastFromALocalAndARemoteRoot() {
        int n = 4;
        float[][] data = randomPerRank(random, n, 21, DType.F16);
        for (int root : new int[] {1, 2}) {
            List<float[]> out = TcpTestSupport.onRanks(2, n, TIMEOUT, sharedMemory(), (rank, backend, world) -> {
                try (Tensor buf = tensorOf(backend, DType.F16, data[rank])) {
                    world.broadcast(buf, root, backend.computeStream());
                    world.barrier(backend.computeStream());
                    return backend.toHost(buf);
                }
            });
            for (int r = 0; r < n; r++) {
                assertArrayEquals(data[root], out.get(r), "root " + root + " rank " + r);
            }
        }
    }

    @Test
    void meshGroupsWithinAndAcrossProcessesAndRingByteCounts() {
        int n = 4;
        float[][] data = randomPerRank(random, n, 8, DType.F32);
        List<Object[]> out = TcpTestSupport.onRanks(2, n, TIMEOUT, sharedMemory(), (rank, backend, world) -> {
            try (DeviceMesh mesh = DeviceMesh.create(world, 2);
                 Tensor a = tensorOf(backend, DType.F32, data[rank]);
                 Tensor b = tensorOf(backend, DType.F32, data[rank])) {
                Backend.Stream second = backend.newStream("replicate");
                second.waitFor(backend.computeStream().record());
                mesh.shard().allReduce(a, Reduction.SUM, backend.computeStream());      // {0,1}, {2,3}: one process each
                mesh.replicate().allReduce(b, Reduction.SUM, second);                   // {0,2}, {1,3}: across processes
                backend.computeStream().waitFor(second.record());
                second.close();
                float[] result = new float[16];
                backend.copyToHost(a, result, 0);
                backend.copyToHost(b, result, 8);
                return new Object[] {result, world.counters().snapshot()};
            }
        });
        for (int r = 0; r < n; r++) {
            float[] result = (float[]) out.get(r)[0];
            for (int i = 0; i < 8; i++) {
                int s = Math.min(r, r ^ 1);
                int p = Math.min(r, r ^ 2);
                assertEquals(data[s][i] + data[s + 1][i], result[i], 0f);
                assertEquals(data[p][i] + data[p + 2][i], result[8 + i], 0f);
            }
        }
        List<CommBytes> local = CommTestSupport.onRanks(n, (rank, backend, world) -> countSome(backend, world));
        List<CommBytes> tcp = TcpTestSupport.onRanks(2, n, TIMEOUT, sharedMemory(), (rank, backend, world) -> countSome(backend, world));
        assertEquals(local, tcp, "the TCP group counts bytes as the in-process group does (the ring convention)");
    }

    private static CommBytes countSome(Backend backend, Communicator world) {
        try (Tensor in = backend.zeros(DType.BF16, MemoryCategory.WORKSPACE, 6);
             Tensor full = backend.zeros(DType.BF16, MemoryCategory.WORKSPACE, 6L * world.size());
             Tensor f32 = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 10)) {
            world.allGather(in, full, backend.computeStream());
            world.reduceScatter(full, in, Reduction.AVG, backend.computeStream());
            world.allReduce(f32, Reduction.SUM, backend.computeStream());
            world.broadcast(f32, 1, backend.computeStream());
            backend.computeStream().synchronize();
            return world.counters().snapshot();
        }
    }

    @Test
    void ranksThatDisagreeOnTheCollectiveFailNamingBothSides() {
        RuntimeException e = assertThrows(RuntimeException.class, () -> TcpTestSupport.onRanks(2, 2, TIMEOUT, sharedMemory(),
                (rank, backend, world) -> {
                    try (Tensor a = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8);
                         Tensor b = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 4)) {
                        if (rank == 0) {
                            world.allGather(b, a, backend.computeStream());
                        } else {
                            world.reduceScatter(a, b, Reduction.SUM, backend.computeStream());
                        }
                        backend.computeStream().synchronize();
                        return null;
                    }
                }));
        String m = messages(e);
        assertTrue(m.contains("ranks disagree on the collective"), m);
        assertTrue(m.contains("allGather #1 (fp32, 4 elements)") && m.contains("reduceScatter #1 (fp32, 8 elements)"), m);
    }

    @Test
    void aRankThatNeverArrivesIsNamedWhenTheWatchdogFires() {
        long start = System.nanoTime();
        RuntimeException e = assertThrows(RuntimeException.class, () -> TcpTestSupport.onRanks(2, 2, Duration.ofSeconds(1), sharedMemory(),
                (rank, backend, world) -> {
                    try (Tensor a = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
                        if (rank == 1) {
                            Thread.sleep(2500);      // busy elsewhere past the timeout
                        }
                        world.allReduce(a, Reduction.SUM, backend.computeStream());
                        backend.computeStream().synchronize();
                        return null;
                    }
                }));
        double seconds = (System.nanoTime() - start) / 1e9;
        String m = messages(e);
        assertTrue(m.matches("(?s).*rank 1 \\(process 1, host [^)]+\\) did not arrive within 1 s.*"), m);
        assertTrue(seconds < 15, "took " + seconds + " s");
    }

    @Test
    void aPeerWhoseConnectionsDieIsNamedAtOnce() {
        long start = System.nanoTime();
        RuntimeException e = assertThrows(RuntimeException.class, () -> TcpTestSupport.onProcesses(2, 2, TIMEOUT, sharedMemory(),
                (pg, group) -> {
                    if (pg.process() == 1) {
                        try (Backend backend = Backends.create(Device.CPU, new MemoryTracker("rank 1"), new BackendOptions(1, false))) {
                            group.communicator(1, backend);     // connects, then the process "dies": its sockets close
                            Thread.sleep(300);
                            group.close();
                        }
                        return List.of();
                    }
                    return LocalLauncher.run(group, rank -> {
                        try (Backend backend = Backends.create(Device.CPU, new MemoryTracker("rank 0"), new BackendOptions(1, false));
                             Communicator world = group.communicator(rank, backend);
                             Tensor a = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
                            world.allReduce(a, Reduction.SUM, backend.computeStream());
                            backend.computeStream().synchronize();
                            return null;
                        }
                    });
                }));
        double seconds = (System.nanoTime() - start) / 1e9;
        String m = messages(e);
        assertTrue(m.matches("(?s).*lost the connection to rank 1 \\(process 1, host [^)]+\\).*"), m);
        assertTrue(seconds < 10, "took " + seconds + " s (the timeout is 20 s)");
    }

    private static String messages(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            b.append(t.getMessage()).append(" | ");
        }
        return b.toString();
    }
}
