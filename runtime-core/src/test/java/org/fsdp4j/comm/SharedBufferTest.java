// The in-process group's shared buffers: one buffer every rank holds at the same address, each
// rank charged its equal part, freed at the last rank's close; an all-gather whose inputs are its
// chunks and whose output is the buffer itself moves nothing and still meets every rank. Groups
// whose ranks cannot share memory (stream events, as for ranks on a GPU) say so and refuse.
package org.fsdp4j.comm;

import static org.fsdp4j.comm.CommTestSupport.onRanks;
import static org.fsdp4j.comm.CommTestSupport.randomPerRank;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.cpu.CpuStorage;
import org.junit.jupiter.api.Test;

class SharedBufferTest {

    @Test
    void everyRankHoldsTheSameBufferAndAnAllGatherFromItsChunksFillsItInPlace() {
        int n = 3;
        int shard = 41;
        float[][] data = randomPerRank(new Random(7), n, shard, DType.F32);
        CyclicBarrier allClosed = new CyclicBarrier(n);
        List<long[]> seen = onRanks(n, LocalGroup.Dispatch.HOST_FUNCTIONS, (rank, backend, world) -> {
            assertTrue(world.sharesMemory());
            long before = backend.memory().liveBytes(MemoryCategory.PARAMS);
            SharedBuffer shared = world.sharedBuffer(DType.F32, MemoryCategory.PARAMS, (long) n * shard);
            long charged = backend.memory().liveBytes(MemoryCategory.PARAMS) - before;
            Tensor whole = shared.tensor();
            Tensor own = whole.view((long) rank * shard, shard);
            backend.copyFromHost(data[rank], 0, own);
            world.allGather(own, whole, backend.computeStream());
            float[] got = backend.toHost(whole);
            for (int q = 0; q < n; q++) {
                assertArrayEquals(data[q], java.util.Arrays.copyOfRange(got, q * shard, (q + 1) * shard),
                        "rank " + rank + " reads chunk " + q);
            }
            long address = CpuStorage.hostAddress(whole);
            world.barrier(backend.computeStream());      // every rank has read before any closes
            backend.computeStream().synchronize();
            shared.close();
            shared.close();                             // idempotent: one handle counts once
            allClosed.await();
            long after = backend.memory().liveBytes(MemoryCategory.PARAMS) - before;
            return new long[] {address, charged, after, world.counters().snapshot().receivedBytes()};
        });
        for (int r = 0; r < n; r++) {
            assertEquals(seen.get(0)[0], seen.get(r)[0], "rank " + r + " holds the same memory as rank 0");
            assertEquals((long) shard * 4, seen.get(r)[1], "rank " + r + " is charged its own chunk");
            assertEquals(0, seen.get(r)[2], "rank " + r + ": freed once every rank closed its handle");
            assertEquals((long) (n - 1) * shard * 4, seen.get(r)[3],
                    "counted as the all-gather NCCL would run, though nothing moved");
        }
    }

    @Test
    void aSharedBufferIsChargedInEqualPartsOrRefused() {
        List<String> errors = onRanks(2, LocalGroup.Dispatch.HOST_FUNCTIONS, (rank, backend, world) ->
                assertThrows(IllegalArgumentException.class,
                        () -> world.sharedBuffer(DType.F32, MemoryCategory.PARAMS, 7)).getMessage());
        assertTrue(errors.get(0).contains("multiple of 2"), errors.get(0));
    }

    @Test
    void groupsWhoseRanksDoNotShareMemorySaySoAndRefuse() {
        List<String> errors = onRanks(new LocalGroup(2, Duration.ofSeconds(20), LocalGroup.Dispatch.STREAM_EVENTS),
                (rank, backend, world) -> {
                    assertFalse(world.sharesMemory());
                    return assertThrows(UnsupportedOperationException.class,
                            () -> world.sharedBuffer(DType.F32, MemoryCategory.PARAMS, 8)).getMessage();
                });
        assertTrue(errors.get(0).contains("sharesMemory"), errors.get(0));
        List<Boolean> separate = onRanks(2, LocalGroup.Dispatch.HOST_FUNCTIONS,
                (rank, backend, world) -> new SeparateAddressSpaces(world).sharesMemory());
        assertEquals(List.of(false, false), separate);
    }
}
