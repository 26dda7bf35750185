// The in-process group's collectives on real CPU-backend buffers: every op, every dtype, sizes
// that N does not divide, checked against the fp64 result (tolerance of one rounding to the
// dtype) and bit for bit against "fp32 sum in rank order, rounded once"; plus the byte counts,
// sub-groups of a 2-D mesh, and the latency decorator. The collectives are checked both ways
// the group can run them (host functions on the streams, and stream events as for a shared GPU).
package org.fsdp4j.comm;

import static org.fsdp4j.comm.CommTestSupport.exactSum;
import static org.fsdp4j.comm.CommTestSupport.onRanks;
import static org.fsdp4j.comm.CommTestSupport.randomPerRank;
import static org.fsdp4j.comm.CommTestSupport.reduceLikeTheGroup;
import static org.fsdp4j.comm.CommTestSupport.tensorOf;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class LocalGroupCollectivesTest {

    private final long seed = System.nanoTime();
    private final Random random = new Random(seed);

    /** Relative tolerance of one rounding to dtype, plus fp32 summation slack. */
    private static double rtol(DType dtype) {
        return dtype == DType.F32 ? 1e-6 : dtype == DType.F16 ? 1e-3 : 8e-3;
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void allGatherConcatenatesEveryRanksInputExactly(LocalGroup.Dispatch dispatch) {
        for (int n : new int[] {1, 2, 3, 4}) {
            for (DType dtype : List.of(DType.F32, DType.F16, DType.BF16)) {
                int shard = 37;
                float[][] data = randomPerRank(random, n, shard, dtype);
                List<float[]> out = onRanks(n, dispatch, (rank, backend, world) -> {
                    try (Tensor in = tensorOf(backend, dtype, data[rank]);
                         Tensor gathered = backend.allocate(dtype, MemoryCategory.GATHERED, (long) n * shard)) {
                        world.allGather(in, gathered, backend.computeStream());
                        return backend.toHost(gathered);
                    }
                });
                for (int r = 0; r < n; r++) {
                    for (int q = 0; q < n; q++) {
                        float[] chunk = java.util.Arrays.copyOfRange(out.get(r), q * shard, (q + 1) * shard);
                        assertArrayEquals(data[q], chunk, "rank " + r + " chunk " + q + " N=" + n + " " + dtype);
                    }
                }
            }
        }
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void inPlaceAllGatherKeepsTheOwnChunkAndFillsTheRest(LocalGroup.Dispatch dispatch) {
        int n = 3;
        int shard = 10;
        float[][] data = randomPerRank(random, n, shard, DType.BF16);
        List<float[]> out = onRanks(n, dispatch, (rank, backend, world) -> {
            try (Tensor flat = backend.allocate(DType.BF16, MemoryCategory.GATHERED, (long) n * shard)) {
                backend.fill(flat, Float.NaN);
                Tensor own = flat.view((long) rank * shard, shard);
                backend.copyFromHost(data[rank], 0, own);
                world.allGather(own, flat, backend.computeStream());
                return backend.toHost(flat);
            }
        });
        for (int r = 0; r < n; r++) {
            for (int q = 0; q < n; q++) {
                assertArrayEquals(data[q], java.util.Arrays.copyOfRange(out.get(r), q * shard, (q + 1) * shard));
            }
        }
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void reduceScatterSumsInRankOrderAndRoundsOnce(LocalGroup.Dispatch dispatch) {
        for (int n : new int[] {1, 2, 3, 4}) {
            for (DType dtype : List.of(DType.F32, DType.F16, DType.BF16)) {
                for (Reduction red : List.of(Reduction.SUM, Reduction.AVG, Reduction.fp16Average(n))) {
                    int shard = 29;
                    float[][] data = randomPerRank(random, n, n * shard, dtype);
                    List<float[]> out = onRanks(n, dispatch, (rank, backend, world) -> {
                        try (Tensor in = tensorOf(backend, dtype, data[rank]);
                             Tensor shardOut = backend.allocate(dtype, MemoryCategory.GRADS, shard)) {
                            world.reduceScatter(in, shardOut, red, backend.computeStream());
                            return backend.toHost(shardOut);
                        }
                    });
                    String ctx = "N=" + n + " " + dtype + " " + red + " seed " + seed;
                    for (int r = 0; r < n; r++) {
                        for (int i = 0; i < shard; i++) {
                            int k = r * shard + i;
                            double exact = exactSum(data, k) * red.scaleAfterSum(n);
                            float got = out.get(r)[i];
                            assertEquals(reduceLikeTheGroup(data, k, (float) red.scaleAfterSum(n), dtype), got, 0f, ctx);
                            assertEquals(exact, got, 1e-6 + rtol(dtype) * Math.abs(exact), ctx + " element " + k);
                        }
                    }
                }
            }
        }
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void allReduceGivesEveryRankTheSameBits(LocalGroup.Dispatch dispatch) {
        for (int n : new int[] {1, 2, 3, 4}) {
            for (DType dtype : List.of(DType.F32, DType.F16, DType.BF16)) {
                int numel = 50;   // not a multiple of 3 or 4: uneven chunks
                float[][] data = randomPerRank(random, n, numel, dtype);
                List<float[]> out = onRanks(n, dispatch, (rank, backend, world) -> {
                    try (Tensor buf = tensorOf(backend, dtype, data[rank])) {
                        world.allReduce(buf, Reduction.AVG, backend.computeStream());
                        return backend.toHost(buf);
                    }
                });
                for (int r = 0; r < n; r++) {
                    assertArrayEquals(out.get(0), out.get(r), "rank " + r + " differs, N=" + n);
                }
                for (int i = 0; i < numel; i++) {
                    assertEquals(reduceLikeTheGroup(data, i, (float) (1.0 / n), dtype), out.get(0)[i], 0f);
                    double exact = exactSum(data, i) / n;
                    assertEquals(exact, out.get(0)[i], 1e-6 + rtol(dtype) * Math.abs(exact), "seed " + seed);
                }
            }
        }
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void broadcastCopiesTheRootsBuffer(LocalGroup.Dispatch dispatch) {
        int n = 4;
        float[][] data = randomPerRank(random, n, 21, DType.F16);
        List<float[]> out = onRanks(n, dispatch, (rank, backend, world) -> {
            try (Tensor buf = tensorOf(backend, DType.F16, data[rank])) {
                world.broadcast(buf, 2, backend.computeStream());
                return backend.toHost(buf);
            }
        });
        for (int r = 0; r < n; r++) {
            assertArrayEquals(data[2], out.get(r));
        }
    }

    @Test
    void collectivesRunInIssueOrderOnTheirStreamAndOthersWaitThroughEvents() {
        int n = 3;
        float[][] data = randomPerRank(random, n, 12, DType.F32);
        List<float[]> out = onRanks(n, (rank, backend, world) -> {
            try (Tensor a = tensorOf(backend, DType.F32, data[rank]);
                 Tensor b = tensorOf(backend, DType.F32, data[rank])) {
                Backend.Stream comm = backend.newStream("comm");
                Backend.Stream other = backend.newStream("other");
                Communicator onComm = world.split(0, rank, "comm");
                comm.waitFor(backend.computeStream().record());   // a and b were written on the compute stream
                onComm.allReduce(a, Reduction.SUM, comm);
                onComm.allReduce(b, Reduction.AVG, comm);
                Backend.Event queued = comm.record();
                onComm.barrier(comm);
                assertThrows(IllegalArgumentException.class, () -> onComm.barrier(other),
                        "one communicator serves one stream");
                backend.computeStream().waitFor(comm.record());   // the host does not wait
                float[] result = new float[24];
                backend.copyToHost(a, result, 0);
                backend.copyToHost(b, result, 12);
                assertTrue(queued.isDone(), "the compute stream read after the collectives completed");
                onComm.close();
                other.close();
                comm.close();
                return result;
            }
        });
        for (int i = 0; i < 12; i++) {
            assertEquals(reduceLikeTheGroup(data, i, 1f, DType.F32), out.get(1)[i], 0f);
            assertEquals(reduceLikeTheGroup(data, i, (float) (1.0 / n), DType.F32), out.get(1)[12 + i], 0f);
        }
    }

    @Test
    void byteCountsFollowTheRingConvention() {
        int n = 4;
        int shard = 6;
        List<CommBytes> bytes = onRanks(n, (rank, backend, world) -> {
            try (Tensor in = backend.zeros(DType.BF16, MemoryCategory.WORKSPACE, shard);
                 Tensor full = backend.zeros(DType.BF16, MemoryCategory.WORKSPACE, (long) n * shard);
                 Tensor f32 = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 10)) {
                world.allGather(in, full, backend.computeStream());
                world.reduceScatter(full, in, Reduction.AVG, backend.computeStream());
                world.allReduce(f32, Reduction.SUM, backend.computeStream());
                world.broadcast(f32, 1, backend.computeStream());
                world.barrier(backend.computeStream());
                return world.counters().snapshot();
            }
        });
        for (int r = 0; r < n; r++) {
            CommBytes b = bytes.get(r);
            // gathered buffer 4·6·2 = 48 B: (N−1)/N of it = 36 B each way
            assertEquals(36, b.sent(CommOp.ALL_GATHER));
            assertEquals(36, b.received(CommOp.ALL_GATHER));
            assertEquals(36, b.sent(CommOp.REDUCE_SCATTER));
            // all-reduce 40 B: 2·3·40/4 = 60 B each way
            assertEquals(60, b.sent(CommOp.ALL_REDUCE));
            // ring broadcast from rank 1: rank 0 (= root − 1) sends nothing, rank 1 receives nothing
            assertEquals(r == 0 ? 0 : 40, b.sent(CommOp.BROADCAST));
            assertEquals(r == 1 ? 0 : 40, b.received(CommOp.BROADCAST));
            assertEquals(36 + 36 + 60 + (r == 0 ? 0 : 40), b.sentBytes());
        }
    }

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void meshSubGroupsReduceOverTheRightRanks(LocalGroup.Dispatch dispatch) {
        int n = 4;
        float[][] data = randomPerRank(random, n, 8, DType.F32);
        List<float[]> out = onRanks(n, dispatch, (rank, backend, world) -> {
            try (DeviceMesh mesh = DeviceMesh.create(world, 2);
                 Tensor a = tensorOf(backend, DType.F32, data[rank]);
                 Tensor b = tensorOf(backend, DType.F32, data[rank])) {
                assertEquals(2, mesh.shardSize());
                assertEquals(2, mesh.replicateSize());
                assertEquals(rank % 2, mesh.shard().rank());
                assertEquals(rank / 2, mesh.replicate().rank());
                Backend.Stream second = backend.newStream("replicate");
                second.waitFor(backend.computeStream().record());   // b was written on the compute stream
                mesh.shard().allReduce(a, Reduction.SUM, backend.computeStream());
                mesh.replicate().allReduce(b, Reduction.SUM, second);
                backend.computeStream().waitFor(second.record());
                second.close();
                float[] result = new float[16];
                backend.copyToHost(a, result, 0);
                backend.copyToHost(b, result, 8);
                return result;
            }
        });
        for (int r = 0; r < n; r++) {
            int shardPeer = r ^ 1;          // {0,1}, {2,3}
            int replicatePeer = r ^ 2;      // {0,2}, {1,3}
            for (int i = 0; i < 8; i++) {
                int lo = Math.min(r, shardPeer);
                assertEquals(data[lo][i] + data[lo ^ 1][i], out.get(r)[i], 0f);
                int first = Math.min(r, replicatePeer);
                assertEquals(data[first][i] + data[first ^ 2][i], out.get(r)[8 + i], 0f);
            }
        }
    }

    @Test
    void meshRejectsAShardGroupSizeThatDoesNotDivideTheWorld() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> DeviceMesh.checkShape(4, 3));
        assertEquals("shard group size 3 does not divide world size 4: use one of 1, 2, 4", e.getMessage());
        assertEquals("world size must be >= 1, got 0",
                assertThrows(IllegalArgumentException.class, () -> new LocalGroup(0, Duration.ofSeconds(1))).getMessage());
    }

    @Test
    void fp16FactorsFollowFsdp2() {
        assertEquals(Reduction.sumDivided(1, 1), Reduction.fp16Average(1));
        assertEquals(Reduction.sumDivided(2, 1), Reduction.fp16Average(2));
        assertEquals(Reduction.sumDivided(2, 1.5), Reduction.fp16Average(3));
        assertEquals(Reduction.sumDivided(2, 2), Reduction.fp16Average(4));
        assertEquals(Reduction.sumDivided(4, 2), Reduction.fp16Average(8));
        assertEquals(Reduction.sumDivided(4, 4), Reduction.fp16Average(16));
    }

    @Test
    void latencyDecoratorDelaysEveryCallInOrder() {
        int n = 2;
        long latencyMs = 40;
        float[][] data = randomPerRank(random, n, 5, DType.F32);
        List<Object[]> out = onRanks(n, (rank, backend, world) -> {
            try (LatencyCommunicator slow = new LatencyCommunicator(world.split(0, rank, "slow"),
                    Duration.ofMillis(latencyMs));
                 Tensor buf = tensorOf(backend, DType.F32, data[rank])) {
                long t0 = System.nanoTime();
                slow.allReduce(buf, Reduction.SUM, backend.computeStream());
                slow.barrier(backend.computeStream());
                slow.barrier(backend.computeStream());
                float[] result = backend.toHost(buf);
                long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
                return new Object[] {elapsedMs, result};
            }
        });
        for (Object[] o : out) {
            assertTrue((long) o[0] >= 3 * latencyMs, "three calls took only " + o[0] + " ms");
            for (int i = 0; i < 5; i++) {
                assertEquals(data[0][i] + data[1][i], ((float[]) o[1])[i], 0f);
            }
        }
    }
}
