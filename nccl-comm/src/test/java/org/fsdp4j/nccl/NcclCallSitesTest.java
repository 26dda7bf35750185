// Every NCCL call site, checked without a GPU: the communicator is driven with a recording NCCL
// and a recording device, and each collective must reach NCCL with the element counts it takes
// (all-gather: the send count, reduce-scatter: the receive count), the dtype that travels, the
// reduction (ncclAvg, or fp16's divided sum: scale the input, ncclSum, scale the output), the
// right addresses (an in-place all-gather sends this rank's chunk of the output) and the stream it
// was given. Bad arguments never reach NCCL; a failed call aborts every communicator of the group
// and names the operation, the group, the rank, NCCL's error string and its last-error text.
package org.fsdp4j.nccl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.cpu.CpuBackend;
import org.fsdp4j.comm.CommBytes;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.CommOp;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.Reduction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class NcclCallSitesTest {

    /** NCCL as a list of the calls made; a call can be made to fail with a result code. */
    static final class RecordingNccl implements NcclApi {
        final List<String> calls = java.util.Collections.synchronizedList(new ArrayList<>());
        final java.util.concurrent.atomic.AtomicInteger asyncErrorPolls = new java.util.concurrent.atomic.AtomicInteger();
        volatile int asyncError = SUCCESS;   // what commGetAsyncError reports (the watchdog polls it)
        final byte[] id = new byte[NativeNccl.UNIQUE_ID_BYTES];
        String failing;          // the call that returns failWith
        int failWith;
        long nextComm = 0x100;

        RecordingNccl() {
            for (int i = 0; i < id.length; i++) {
                id[i] = (byte) (31 * i + 7);
            }
        }

        private int rc(String call) {
            calls.add(call);
            return failing != null && call.startsWith(failing) ? failWith : SUCCESS;
        }

        @Override
        public int uniqueId(byte[] out) {
            System.arraycopy(id, 0, out, 0, id.length);
            return rc("uniqueId");
        }

        @Override
        public synchronized int commInitRank(long[] commOut, int nranks, byte[] uniqueId, int rank, boolean blocking) {
            assertArrayEquals(id, uniqueId, "every rank gets the group's unique id");
            commOut[0] = nextComm++;
            int rc = rc("commInitRank(" + nranks + ", rank " + rank + (blocking ? "" : ", non-blocking") + ")");
            return rc == SUCCESS && !blocking ? IN_PROGRESS : rc;      // as NCCL answers a non-blocking init
        }

        @Override
        public synchronized int commSplit(long comm, int color, int key, long[] commOut, boolean blocking) {
            commOut[0] = nextComm++;
            int rc = rc("commSplit(" + Long.toHexString(comm) + ", color " + color + ", key " + key
                    + (blocking ? "" : ", non-blocking") + ")");
            return rc == SUCCESS && !blocking ? IN_PROGRESS : rc;
        }

        @Override
        public int commFinalize(long comm) {
            return rc("commFinalize(" + Long.toHexString(comm) + ")");
        }

        @Override
        public int version(int[] out) {
            out[0] = 22903;
            return SUCCESS;
        }

        @Override
        public int commUserRank(long comm, int[] out) {
            out[0] = 1;
            return rc("commUserRank(" + Long.toHexString(comm) + ")");
        }

        @Override
        public int commCount(long comm, int[] out) {
            out[0] = 2;
            return rc("commCount(" + Long.toHexString(comm) + ")");
        }

        @Override
        public int allGather(long send, long recv, long sendCount, DType dtype, long comm, long stream) {
            return rc("allGather(" + hex(send) + ", " + hex(recv) + ", " + sendCount + ", " + dtype + ", stream " + stream
                    + ")");
        }

        @Override
        public int reduceScatter(long send, long recv, long recvCount, DType dtype, int op, long comm, long stream) {
            return rc("reduceScatter(" + hex(send) + ", " + hex(recv) + ", " + recvCount + ", " + dtype + ", op " + op
                    + ", stream " + stream + ")");
        }

        @Override
        public int allReduce(long send, long recv, long count, DType dtype, int op, long comm, long stream) {
            return rc("allReduce(" + hex(send) + ", " + hex(recv) + ", " + count + ", " + dtype + ", op " + op
                    + ", stream " + stream + ")");
        }

        @Override
        public int broadcast(long send, long recv, long count, DType dtype, int root, long comm, long stream) {
            return rc("broadcast(" + hex(send) + ", " + hex(recv) + ", " + count + ", " + dtype + ", root " + root
                    + ", stream " + stream + ")");
        }

        @Override
        public int groupStart() {
            return rc("groupStart");
        }

        @Override
        public int groupEnd() {
            return rc("groupEnd");
        }

        /** Not in the list of calls: the watchdog's thread polls it at its own pace. */
        @Override
        public int commGetAsyncError(long comm, int[] out) {
            asyncErrorPolls.incrementAndGet();
            out[0] = asyncError;
            return SUCCESS;
        }

        @Override
        public int commAbort(long comm) {
            return rc("commAbort(" + Long.toHexString(comm) + ")");
        }

        @Override
        public int commDestroy(long comm) {
            return rc("commDestroy(" + Long.toHexString(comm) + ")");
        }

        @Override
        public String errorString(int result) {
            return result == 3 ? "internal error - please report this issue to the NCCL developers" : "result " + result;
        }

        @Override
        public String lastError(long comm) {
            return "fake transport lost its peer";
        }

        private static String hex(long address) {
            return "0x" + Long.toHexString(address);
        }
    }

    /** A GPU as addresses: each storage at its own base; streams numbered; scales recorded in NCCL's list. */
    static final class RecordingDevice implements NcclDevice {
        private final RecordingNccl log;
        private final Map<Object, Long> bases;
        private final Map<Backend.Stream, Long> streams;

        RecordingDevice(RecordingNccl log, Map<Object, Long> bases, Map<Backend.Stream, Long> streams) {
            this.log = log;
            this.bases = bases;
            this.streams = streams;
        }

        @Override
        public String name() {
            return "cuda:7";
        }

        @Override
        public long address(Tensor t) {
            long base = bases.computeIfAbsent(t.storage(), s -> 0x1000_0000L * (bases.size() + 1));
            return base + t.byteOffset();
        }

        @Override
        public long stream(Backend.Stream stream) {
            return streams.computeIfAbsent(stream, s -> (long) streams.size() + 1);
        }

        @Override
        public void scale(Tensor t, float alpha, Backend.Stream stream) {
            log.calls.add("scale(0x" + Long.toHexString(address(t)) + ", " + alpha + ", stream " + stream(stream) + ")");
        }

        @Override
        public void makeCurrent() {
            log.calls.add("makeCurrent");
        }

        @Override
        public long scratch() {
            return 0x5c5c;
        }

        @Override
        public void close() {
        }

        @Override
        public NcclDevice sibling() {
            return this;
        }
    }

    final RecordingNccl nccl = new RecordingNccl();
    final Map<Object, Long> bases = new IdentityHashMap<>();
    final Map<Backend.Stream, Long> streams = new IdentityHashMap<>();
    final CpuBackend backend = new CpuBackend(new MemoryTracker("nccl test"), 1);   // only for tensors and streams
    final NcclGroup group = new NcclGroup(nccl, 4, Duration.ofSeconds(5), b -> new RecordingDevice(nccl, bases, streams));

    @AfterEach
    void close() {
        backend.close();
    }

    private Communicator rank(int r) {
        return group.communicator(r, backend);
    }

    private Tensor t(DType dtype, long n) {
        return backend.allocate(dtype, MemoryCategory.WORKSPACE, n);
    }

    private List<String> since(int mark) {
        return List.copyOf(nccl.calls.subList(mark, nccl.calls.size()));
    }

    @Test
    void collectivesReachNcclWithTheirCountsDtypesReductionsAndStreams() {
        Communicator c = rank(2);
        assertEquals(List.of("uniqueId", "makeCurrent", "commInitRank(4, rank 2, non-blocking)"), nccl.calls);
        assertTrue(nccl.asyncErrorPolls.get() > 0, "a non-blocking init is polled until it is ready");
        Backend.Stream gather = backend.newStream("all-gather");
        Backend.Stream reduce = backend.newStream("reduce-scatter");
        try (Tensor in = t(DType.BF16, 5); Tensor out = t(DType.BF16, 20); Tensor grad = t(DType.F32, 24);
             Tensor shard = t(DType.F32, 6); Tensor half = t(DType.F16, 24); Tensor halfShard = t(DType.F16, 6)) {
            int mark = nccl.calls.size();
            c.allGather(in, out, gather);
            c.allGather(out.view(10, 5), out, gather);                   // in place: rank 2's chunk, 10 elements in
            assertEquals(List.of("allGather(0x10000000, 0x20000000, 5, BF16, stream 1)",
                    "allGather(0x20000014, 0x20000000, 5, BF16, stream 1)"), since(mark));

            mark = nccl.calls.size();
            c.reduceScatter(grad, shard, Reduction.AVG, reduce);
            c.reduceScatter(half, halfShard, Reduction.fp16Average(4), reduce);   // pre 2, post 2
            assertEquals(List.of("reduceScatter(0x30000000, 0x40000000, 6, F32, op 4, stream 2)",
                    "scale(0x50000000, 0.5, stream 2)",
                    "reduceScatter(0x50000000, 0x60000000, 6, F16, op 0, stream 2)",
                    "scale(0x60000000, 0.5, stream 2)"), since(mark));

            mark = nccl.calls.size();
            c.allReduce(shard, Reduction.sumDivided(2, 1), reduce);
            c.broadcast(in, 3, reduce);
            c.barrier(reduce);
            assertEquals(List.of("scale(0x40000000, 0.5, stream 2)",
                    "allReduce(0x40000000, 0x40000000, 6, F32, op 0, stream 2)",
                    "broadcast(0x10000000, 0x10000000, 5, BF16, root 3, stream 2)",
                    "allReduce(0x5c5c, 0x5c5c, 1, F32, op 0, stream 2)"), since(mark));

            // the same ring convention as the in-process group: (N−1)/N of the gathered buffer each way
            CommBytes bytes = c.counters().snapshot();
            assertEquals(2 * (3 * 40 / 4), bytes.sent(CommOp.ALL_GATHER));
            assertEquals(3 * 96 / 4 + 3 * 48 / 4, bytes.sent(CommOp.REDUCE_SCATTER));
        } finally {
            gather.close();
            reduce.close();
        }
    }

    @Test
    void badArgumentsNeverReachNccl() {
        Communicator c = rank(0);
        Backend.Stream s = backend.computeStream();
        int mark = nccl.calls.size();
        try (Tensor a = t(DType.F32, 4); Tensor b = t(DType.BF16, 16); Tensor big = t(DType.F32, 20)) {
            assertTrue(assertThrows(IllegalArgumentException.class, () -> c.allGather(a, b, s)).getMessage()
                    .contains("input is fp32 but output is bf16"));
            assertTrue(assertThrows(IllegalArgumentException.class, () -> c.allGather(a, big, s)).getMessage()
                    .contains("output has 20 elements, expected 4 × 4"));
            assertThrows(IllegalArgumentException.class, () -> c.reduceScatter(big, a, Reduction.AVG, s));
            assertThrows(IllegalArgumentException.class, () -> c.broadcast(a, 4, s));
        }
        assertEquals(List.of(), since(mark));
    }

    @Test
    void aFailedCallAbortsEveryCommunicatorAndSaysWhatNcclSaid() {
        Communicator r0 = rank(0);
        Communicator r1 = rank(1);
        nccl.failing = "reduceScatter";
        nccl.failWith = 3;
        try (Tensor grad = t(DType.F32, 8); Tensor shard = t(DType.F32, 2)) {
            CommException e = assertThrows(CommException.class,
                    () -> r1.reduceScatter(grad, shard, Reduction.AVG, backend.computeStream()));
            assertTrue(e.getMessage().startsWith("reduceScatter #1 on 'world' at rank 1 (cuda:7) failed: internal error"),
                    e.getMessage());
            assertTrue(e.getMessage().contains("(NCCL: fake transport lost its peer)"), e.getMessage());
            assertTrue(nccl.calls.containsAll(List.of("commAbort(100)", "commAbort(101)")), nccl.calls.toString());
            CommException later = assertThrows(CommException.class,
                    () -> r0.allReduce(grad, Reduction.AVG, backend.computeStream()));
            assertTrue(later.getMessage().contains("group aborted: rank 1 failed: reduceScatter #1"), later.getMessage());
            assertTrue(group.isAborted());
        }
    }

    @Test
    void splitsAskNcclForTheirRankAndSizeAndCloseDestroys() {
        Communicator world = rank(3);
        int mark = nccl.calls.size();
        Communicator shard = world.split(1, 3, "shard[1]");
        assertEquals(List.of("makeCurrent", "commSplit(100, color 1, key 3, non-blocking)", "commUserRank(101)",
                "commCount(101)"), since(mark));
        assertEquals(1, shard.rank());
        assertEquals(2, shard.size());
        assertEquals("world/shard[1]", shard.name());
        shard.close();
        world.close();
        world.close();   // idempotent
        assertTrue(nccl.calls.containsAll(List.of("commFinalize(101)", "commDestroy(101)", "commFinalize(100)",
                "commDestroy(100)")), nccl.calls.toString());
        assertThrows(IllegalStateException.class, () -> world.barrier(backend.computeStream()));
    }

    @Test
    void aFailedInitAbortsTheGroup() {
        nccl.failing = "commInitRank";
        nccl.failWith = 3;
        CommException e = assertThrows(CommException.class, () -> rank(0));
        assertTrue(e.getMessage().startsWith("ncclCommInitRank of 'world' at rank 0 on cuda:7 failed: internal error"),
                e.getMessage());
        assertTrue(group.isAborted());
    }
}
