// One buffer held by ranks in several processes of this host (TcpCommunicator.sharedBuffer): a
// /dev/shm file member 0 writes, mapped once per process and unlinked at once; each rank charged
// its equal part; an all-gather from its chunks into it moves nothing and still shows every rank
// every other rank's latest chunk (so the memory really is shared: only empty frames travel).
// Groups agree on it when made: one process without rings, or every byte over TCP, means no
// shared memory on any rank; ranks of one process share memory without rings. A rank that
// gathers elsewhere than its peers fails, naming the collective.
package org.fsdp4j.comm;

import static org.fsdp4j.comm.CommTestSupport.randomPerRank;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

class TcpSharedBufferTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(20);
    private final Random random = new Random(System.nanoTime());

    @Test
    void processesOfOneHostHoldOneBufferAndGatherFromItInPlace() {
        Assumptions.assumeTrue(Files.isDirectory(ShmFile.DIRECTORY), "this host has no /dev/shm");
        int n = 4;                                    // two processes of two ranks
        int shard = 1031;
        float[][] first = randomPerRank(random, n, shard, DType.F32);
        float[][] second = randomPerRank(random, n, shard, DType.F32);
        List<long[]> seen = TcpTestSupport.onRanks(2, n, TIMEOUT, true, (rank, backend, world) -> {
            assertTrue(world.sharesMemory());
            long before = backend.memory().liveBytes(MemoryCategory.PARAMS);
            SharedBuffer shared = world.sharedBuffer(DType.F32, MemoryCategory.PARAMS, (long) n * shard);
            long charged = backend.memory().liveBytes(MemoryCategory.PARAMS) - before;
            long leftFiles = sharedFiles();           // unlinked once every process mapped it
            Tensor whole = shared.tensor();
            Tensor own = whole.view((long) rank * shard, shard);
            backend.copyFromHost(first[rank], 0, own);
            world.barrier(backend.computeStream());  // no all-gather: each rank still reads the others' writes
            float[] direct = backend.toHost(whole);
            for (int q = 0; q < n; q++) {
                assertArrayEquals(first[q], Arrays.copyOfRange(direct, q * shard, (q + 1) * shard),
                        "rank " + rank + " sees chunk " + q + " where its owner wrote it");
            }
            world.barrier(backend.computeStream());
            for (float[][] data : List.of(first, second)) {   // the second round sees every owner's new values
                backend.copyFromHost(data[rank], 0, own);
                world.allGather(own, whole, backend.computeStream());
                float[] got = backend.toHost(whole);
                for (int q = 0; q < n; q++) {
                    assertArrayEquals(data[q], Arrays.copyOfRange(got, q * shard, (q + 1) * shard),
                            "rank " + rank + " reads chunk " + q);
                }
                world.barrier(backend.computeStream());  // every rank has read before any owner writes again
            }
            backend.computeStream().synchronize();
            shared.close();
            shared.close();                           // idempotent
            return new long[] {charged, leftFiles, world.counters().snapshot().receivedBytes(),
                ((TcpCommunicator) world).gathersInPlace()};
        });
        for (int r = 0; r < n; r++) {
            assertEquals((long) shard * 4, seen.get(r)[0], "rank " + r + " is charged its own chunk");
            assertEquals(0, seen.get(r)[1], "rank " + r + ": no shared file left under /dev/shm");
            assertEquals(2L * (n - 1) * shard * 4, seen.get(r)[2], "counted as the all-gathers NCCL would run");
            assertEquals(2, seen.get(r)[3], "rank " + r + ": both all-gathers only met");
        }
    }

    @Test
    void noRankSharesMemoryWhereOneProcessCannotUseRings() {
        // process 2 refuses rings: its pairs, and so the whole group, stay without shared memory
        List<Boolean> mixed = TcpTestSupport.onProcesses(3, 3, TIMEOUT, true, (pg, group) -> {
            if (pg.process() == 2) {
                group.sharedMemory(false);
            }
            return LocalLauncher.run(group, rank -> {
                try (Backend backend = cpu(rank); Communicator world = group.communicator(rank, backend)) {
                    return world.sharesMemory();
                }
            });
        });
        assertEquals(List.of(false, false, false), mixed);
        List<String> overTcp = TcpTestSupport.onRanks(2, 2, TIMEOUT, false, (rank, backend, world) -> {
            assertFalse(world.sharesMemory());
            return assertThrows(UnsupportedOperationException.class,
                    () -> world.sharedBuffer(DType.F32, MemoryCategory.PARAMS, 8)).getMessage();
        });
        assertTrue(overTcp.get(0).contains("cannot share memory"), overTcp.get(0));
    }

    @Test
    void ranksOfOneProcessShareMemoryWithoutRings() {
        int shard = 17;
        float[][] data = randomPerRank(random, 4, shard, DType.F32);
        List<Boolean> ok = TcpTestSupport.onRanks(2, 4, TIMEOUT, false, (rank, backend, world) -> {
            assertFalse(world.sharesMemory());
            try (Communicator inProcess = world.split(rank / 2, rank, "process")) {
                assertTrue(inProcess.sharesMemory());
                SharedBuffer shared = inProcess.sharedBuffer(DType.F32, MemoryCategory.PARAMS, 2L * shard);
                Tensor own = shared.tensor().view((long) inProcess.rank() * shard, shard);
                backend.copyFromHost(data[rank], 0, own);
                inProcess.allGather(own, shared.tensor(), backend.computeStream());
                float[] got = backend.toHost(shared.tensor());
                int firstRank = rank / 2 * 2;
                for (int q = 0; q < 2; q++) {
                    assertArrayEquals(data[firstRank + q], Arrays.copyOfRange(got, q * shard, (q + 1) * shard));
                }
                inProcess.barrier(backend.computeStream());
                backend.computeStream().synchronize();
                shared.close();
                return ((TcpCommunicator) inProcess).gathersInPlace() == 1;
            }
        });
        assertEquals(List.of(true, true, true, true), ok);
    }

    @Test
    void aRankThatGathersOutsideTheSharedBufferFailsNamingTheCollective() {
        Assumptions.assumeTrue(Files.isDirectory(ShmFile.DIRECTORY), "this host has no /dev/shm");
        RuntimeException e = assertThrows(RuntimeException.class, () -> TcpTestSupport.onRanks(2, 2, TIMEOUT, true,
                (rank, backend, world) -> {
                    SharedBuffer shared = world.sharedBuffer(DType.F32, MemoryCategory.PARAMS, 8);
                    try (Tensor elsewhere = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 8)) {
                        if (rank == 0) {
                            world.allGather(shared.tensor().view(0, 4), shared.tensor(), backend.computeStream());
                        } else {
                            world.allGather(elsewhere.view(4, 4), elsewhere, backend.computeStream());
                        }
                        backend.computeStream().synchronize();
                        return null;
                    } finally {
                        shared.close();
                    }
                }));
        String m = messages(e);
        assertTrue(m.contains("ranks disagree on the collective") && m.contains("allGather #2 (fp32, 4 elements)"), m);
    }

    private static Backend cpu(int rank) {
        return Backends.create(Device.CPU, new MemoryTracker("rank " + rank), new BackendOptions(1, true));
    }

    /** Shared-buffer files of this test's kind still linked under /dev/shm. */
    private static long sharedFiles() {
        if (!Files.isDirectory(ShmFile.DIRECTORY)) {
            return 0;
        }
        try (Stream<Path> files = Files.list(ShmFile.DIRECTORY)) {
            return files.filter(p -> p.getFileName().toString().endsWith(".shared")).count();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String messages(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            b.append(t.getMessage()).append(" | ");
        }
        return b.toString();
    }
}
