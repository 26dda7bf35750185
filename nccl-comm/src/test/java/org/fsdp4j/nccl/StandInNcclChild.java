// One process of a job whose ranks meet through the stand-in NCCL: StandInNcclProcessesTest starts
// it as a child JVM (and runs the collectives in its own JVM for the one-process reference). It
// calls JavaCPP's NCCL and CUDA runtime directly, not NcclGroup or NativeNccl, so that what the
// test checks is the stand-in itself. Process 0 makes the unique id and leaves it in a file of the
// shared folder; each process runs its ranks (rank g on cuda:g, a thread each, as the runtime
// will) through one scenario and reports on stdout one line per event ("name key=value ...").
package org.fsdp4j.nccl;

import static org.bytedeco.cuda.global.cudart.cudaEventCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaEventDisableTiming;
import static org.bytedeco.cuda.global.cudart.cudaEventRecord;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaLaunchHostFunc;
import static org.bytedeco.cuda.global.cudart.cudaMalloc;
import static org.bytedeco.cuda.global.cudart.cudaMemcpy;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToHost;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyHostToDevice;
import static org.bytedeco.cuda.global.cudart.cudaSetDevice;
import static org.bytedeco.cuda.global.cudart.cudaStreamCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaStreamNonBlocking;
import static org.bytedeco.cuda.global.cudart.cudaStreamQuery;
import static org.bytedeco.cuda.global.cudart.cudaStreamSynchronize;
import static org.bytedeco.cuda.global.cudart.cudaStreamWaitEvent;
import static org.bytedeco.cuda.global.nccl.NCCL_VERSION_CODE;
import static org.bytedeco.cuda.global.nccl.ncclAllGather;
import static org.bytedeco.cuda.global.nccl.ncclAllReduce;
import static org.bytedeco.cuda.global.nccl.ncclAvg;
import static org.bytedeco.cuda.global.nccl.ncclBfloat16;
import static org.bytedeco.cuda.global.nccl.ncclBroadcast;
import static org.bytedeco.cuda.global.nccl.ncclCommAbort;
import static org.bytedeco.cuda.global.nccl.ncclCommCount;
import static org.bytedeco.cuda.global.nccl.ncclCommCuDevice;
import static org.bytedeco.cuda.global.nccl.ncclCommDestroy;
import static org.bytedeco.cuda.global.nccl.ncclCommGetAsyncError;
import static org.bytedeco.cuda.global.nccl.ncclCommInitRankConfig;
import static org.bytedeco.cuda.global.nccl.ncclCommSplit;
import static org.bytedeco.cuda.global.nccl.ncclCommUserRank;
import static org.bytedeco.cuda.global.nccl.ncclFloat32;
import static org.bytedeco.cuda.global.nccl.ncclGetLastError;
import static org.bytedeco.cuda.global.nccl.ncclGetUniqueId;
import static org.bytedeco.cuda.global.nccl.ncclInProgress;
import static org.bytedeco.cuda.global.nccl.ncclReduceScatter;
import static org.bytedeco.cuda.global.nccl.ncclSum;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.cudart.cudaHostFn_t;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.cuda.global.nccl;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.cuda.nccl.ncclUniqueId;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;

public final class StandInNcclChild {

    /** Elements per rank and collective: odd, so that no chunk size lines up by accident. */
    static final int COUNT = 257;
    /** The broadcast's root. */
    static final int ROOT = 2;
    /** How long the launch-order scenario holds one stream back (a host function sleeps). */
    static final int DELAY_MS = 300;
    /** The sections a rank's collectives scenario returns, in order. */
    static final List<String> SECTIONS = List.of("allReduce sum f32", "allReduce avg f32", "allReduce sum bf16",
            "allReduce avg bf16", "allGather f32", "reduceScatter sum f32", "reduceScatter avg bf16",
            "broadcast f32 in place", "split allReduce sum f32", "split count/rank/device");

    private StandInNcclChild() {
    }

    /** Args: scenario, shared folder, this process, processes, ranks per process. */
    public static void main(String[] args) {
        try {
            String scenario = args[0];
            Path dir = Path.of(args[1]);
            int process = Integer.parseInt(args[2]);
            int processes = Integer.parseInt(args[3]);
            int perProcess = Integer.parseInt(args[4]);
            Loader.load(cudart.class);
            Loader.load(nccl.class);
            barrier(dir, process, processes);   // loading takes long: no rank waits out a short timeout for it
            switch (scenario) {
                case "collectives" -> {
                    for (Map.Entry<Integer, byte[]> e : collectives(dir, process, processes, perProcess).entrySet()) {
                        Files.write(dir.resolve("collectives-rank" + e.getKey() + ".bin"), e.getValue());
                    }
                }
                case "duplicate" -> duplicate(dir, process);
                case "kill" -> killed(dir, process);
                case "hub-dies" -> hubDies(dir, process);
                case "abort" -> abort(dir, process);
                case "order" -> order(dir, process);
                case "slot-abort" -> slotAbort(dir);
                default -> throw new IllegalArgumentException("no scenario " + scenario);
            }
            report("done");
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace();
            report("failed " + t);
            System.exit(1);
        }
    }

    // ------------------------------------------------------------------ scenarios

    /**
     * Every collective on a communicator of all ranks, made non-blocking and polled, then a split
     * into the even and the odd ranks (keys reversed) and an all-reduce on it; per rank, the
     * results' bytes section after section (SECTIONS), ending with the split's count, rank and device.
     */
    static Map<Integer, byte[]> collectives(Path dir, int process, int processes, int perProcess) throws Exception {
        int nranks = processes * perProcess;
        byte[] id = shareId(dir, "collectives", process);
        List<Integer> ranks = new ArrayList<>();
        for (int i = 0; i < perProcess; i++) {
            ranks.add(process * perProcess + i);
        }
        Map<Integer, byte[]> out = new TreeMap<>();
        for (Map.Entry<Integer, byte[]> e : onThreads(ranks, g -> collectivesRank(id, nranks, g)).entrySet()) {
            out.put(e.getKey(), e.getValue());
        }
        return out;
    }

    private static byte[] collectivesRank(byte[] id, int nranks, int g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        ncclComm world = init(id, nranks, g);
        CUstream_st s = stream();
        int n = COUNT;
        Pointer a = upload(f32Bytes(inputF32(g, n)));
        Pointer a4 = upload(f32Bytes(inputF32(100 + g, nranks * n)));
        Pointer b = upload(bf16Bytes(inputBf16(g, n)));
        Pointer b4 = upload(bf16Bytes(inputBf16(100 + g, nranks * n)));
        Pointer bc = upload(f32Bytes(inputF32(200 + g, n)));
        List<Pointer> results = List.of(malloc(4L * n), malloc(4L * n), malloc(2L * n), malloc(2L * n),
                malloc(4L * nranks * n), malloc(4L * n), malloc(2L * n), bc, malloc(4L * n));
        nccl(ncclAllReduce(a, results.get(0), n, ncclFloat32, ncclSum, world, s), "ncclAllReduce");
        nccl(ncclAllReduce(a, results.get(1), n, ncclFloat32, ncclAvg, world, s), "ncclAllReduce");
        nccl(ncclAllReduce(b, results.get(2), n, ncclBfloat16, ncclSum, world, s), "ncclAllReduce");
        nccl(ncclAllReduce(b, results.get(3), n, ncclBfloat16, ncclAvg, world, s), "ncclAllReduce");
        nccl(ncclAllGather(a, results.get(4), n, ncclFloat32, world, s), "ncclAllGather");
        nccl(ncclReduceScatter(a4, results.get(5), n, ncclFloat32, ncclSum, world, s), "ncclReduceScatter");
        nccl(ncclReduceScatter(b4, results.get(6), n, ncclBfloat16, ncclAvg, world, s), "ncclReduceScatter");
        nccl(ncclBroadcast(bc, bc, n, ncclFloat32, ROOT, world, s), "ncclBroadcast");
        ncclComm half = split(world, g % 2, -g);
        nccl(ncclAllReduce(a, results.get(8), n, ncclFloat32, ncclSum, half, s), "ncclAllReduce (split)");
        int[] count = new int[1];
        int[] rank = new int[1];
        int[] device = new int[1];
        nccl(ncclCommCount(half, count), "ncclCommCount");
        nccl(ncclCommUserRank(half, rank), "ncclCommUserRank");
        nccl(ncclCommCuDevice(half, device), "ncclCommCuDevice");
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        for (ncclComm c : List.of(world, half)) {
            int e = asyncError(c);
            if (e != 0) {
                throw new AssertionError("rank " + g + ": async error " + e + ": " + lastError(c));
            }
        }
        long[] sizes = {4L * n, 4L * n, 2L * n, 2L * n, 4L * nranks * n, 4L * n, 2L * n, 4L * n, 4L * n};
        ByteBuffer all = ByteBuffer.allocate((int) Arrays.stream(sizes).sum() + 12).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < sizes.length; i++) {
            all.put(download(results.get(i), sizes[i]));
        }
        all.putInt(count[0]).putInt(rank[0]).putInt(device[0]);
        nccl(ncclCommDestroy(half), "ncclCommDestroy");
        nccl(ncclCommDestroy(world), "ncclCommDestroy");
        for (Pointer p : List.of(a, a4, b, b4)) {
            check(cudaFree(p), "cudaFree");
        }
        for (Pointer p : results) {
            check(cudaFree(p), "cudaFree");
        }
        return all.array();
    }

    /** Two processes, one rank each, both on cuda:0: making the communicator must fail. */
    private static void duplicate(Path dir, int process) throws Exception {
        byte[] id = shareId(dir, "duplicate", process);
        check(cudaSetDevice(0), "cudaSetDevice");
        ncclComm c = new ncclComm();
        int rc = ncclCommInitRankConfig(c, 2, uniqueId(id), process, config(0));
        int e = rc == ncclInProgress ? poll(c) : rc;
        report("init rc=" + rc + " error=" + e + " last=" + lastError(c));
        // The stand-in's hub lives in process 0: it stays until process 1 has had its verdict too
        // (under load process 0 could exit first, and process 1 would see the hub gone instead).
        Path verdict = dir.resolve("duplicate-verdict-1");
        if (process == 1) {
            Files.writeString(verdict, "seen");
        } else {
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(60);
            while (!Files.exists(verdict) && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
        }
    }

    /** Process 0 waits in an all-reduce that process 1 never issues; the test kills process 1. */
    private static void killed(Path dir, int process) throws Exception {
        byte[] id = shareId(dir, "kill", process);
        check(cudaSetDevice(process), "cudaSetDevice");
        ncclComm c = init(id, 2, process);
        if (process == 1) {
            report("ready");
            Thread.sleep(60_000);
            return;
        }
        waitInACollective(c, process);
    }

    /** Process 1's rank joins (rank 1 of 2) an id whose process 0 the test then kills. */
    private static void hubDies(Path dir, int process) throws Exception {
        byte[] id = shareId(dir, "hub-dies", process);
        if (process == 0) {
            report("ready");
            Thread.sleep(60_000);
            return;
        }
        check(cudaSetDevice(1), "cudaSetDevice");
        ncclConfig_t bad = config(0);
        bad.magic(0x12345678);
        int badConfig = ncclCommInitRankConfig(new ncclComm(), 2, uniqueId(id), 1, bad);
        ncclComm c = new ncclComm();
        int rc = ncclCommInitRankConfig(c, 2, uniqueId(id), 1, config(0));
        CUstream_st s = stream();
        Pointer x = malloc(4L * COUNT);
        int allReduce = ncclAllReduce(x, x, COUNT, ncclFloat32, ncclSum, c, s);
        int count = ncclCommCount(c, new int[1]);
        int[] still = new int[1];
        ncclCommGetAsyncError(c, still);
        report("initializing rc=" + rc + " badConfig=" + badConfig + " allReduce=" + allReduce + " count=" + count
                + " asyncError=" + still[0]);
        long start = System.nanoTime();
        int e = poll(c);
        report("result error=" + e + " ms=" + (System.nanoTime() - start) / 1_000_000 + " last=" + lastError(c));
    }

    /** Process 1 waits in an all-reduce; process 0 aborts its rank (and stays alive until told). */
    private static void abort(Path dir, int process) throws Exception {
        byte[] id = shareId(dir, "abort", process);
        check(cudaSetDevice(process), "cudaSetDevice");
        ncclComm c = init(id, 2, process);
        if (process == 1) {
            waitInACollective(c, process);
            return;
        }
        report("ready");
        awaitFile(dir.resolve("go"));
        report("aborted rc=" + ncclCommAbort(c));
        awaitFile(dir.resolve("done"));
    }

    private static void waitInACollective(ncclComm c, int process) throws InterruptedException {
        CUstream_st s = stream();
        Pointer x = upload(f32Bytes(inputF32(process, COUNT)));
        nccl(ncclAllReduce(x, x, COUNT, ncclFloat32, ncclSum, c, s), "ncclAllReduce");
        Thread.sleep(200);   // its stream has reached it and waits for the other rank
        report("waiting error=" + asyncError(c));
        long start = System.nanoTime();
        int e = 0;
        while (e == 0 && System.nanoTime() - start < 30_000_000_000L) {
            e = asyncError(c);
            Thread.sleep(5);
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        report("result error=" + e + " ms=" + ms + " stream=" + cudaStreamSynchronize(s) + " last=" + lastError(c));
    }

    /**
     * Two communicators (the world and a split of it with one color), an all-reduce on each, c1's
     * issued before c2's on every rank, each on its own stream; rank 0's c1 stream and rank 1's c2
     * stream first wait for an event a sleeping host function holds back, so the ranks' streams reach
     * the two collectives in opposite orders.
     */
    private static void order(Path dir, int process) throws Exception {
        byte[] id = shareId(dir, "order", process);
        check(cudaSetDevice(process), "cudaSetDevice");
        ncclComm c1 = init(id, 2, process);
        ncclComm c2 = split(c1, 0, process);
        CUstream_st s1 = stream();
        CUstream_st s2 = stream();
        CUstream_st side = stream();
        Pointer x = upload(f32Bytes(new float[] {process + 1}));
        Pointer y1 = malloc(4);
        Pointer y2 = malloc(4);
        CUevent_st late = new CUevent_st();
        check(cudaEventCreateWithFlags(late, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        check(cudaLaunchHostFunc(side, SLEEP, null), "cudaLaunchHostFunc");
        check(cudaEventRecord(late, side), "cudaEventRecord");
        check(cudaStreamWaitEvent(process == 0 ? s1 : s2, late, 0), "cudaStreamWaitEvent");
        long start = System.nanoTime();
        nccl(ncclAllReduce(x, y1, 1, ncclFloat32, ncclSum, c1, s1), "ncclAllReduce c1");
        nccl(ncclAllReduce(x, y2, 1, ncclFloat32, ncclSum, c2, s2), "ncclAllReduce c2");
        check(cudaStreamSynchronize(s1), "cudaStreamSynchronize");
        check(cudaStreamSynchronize(s2), "cudaStreamSynchronize");
        long ms = (System.nanoTime() - start) / 1_000_000;
        float sum1 = ByteBuffer.wrap(download(y1, 4)).order(ByteOrder.LITTLE_ENDIAN).getFloat();
        float sum2 = ByteBuffer.wrap(download(y2, 4)).order(ByteOrder.LITTLE_ENDIAN).getFloat();
        report("result c1=" + asyncError(c1) + " c2=" + asyncError(c2) + " ms=" + ms + " sum1=" + sum1 + " sum2=" + sum2
                + " last=" + lastError(c1));
    }

    /**
     * One process, ranks 0 and 1 of a communicator A and of its split B, made from one thread (the
     * non-blocking calls return at once). With one kernel slot: rank 0's all-reduce on A, which
     * rank 1 never joins, holds cuda:0's slot; rank 0's all-reduce on B waits for it; then
     * ncclCommAbort of rank 0's B must release that wait at once.
     */
    private static void slotAbort(Path dir) throws Exception {
        byte[] id = shareId(dir, "slot-abort", 0);
        ncclComm[] a = new ncclComm[2];
        ncclComm[] b = new ncclComm[2];
        for (int r = 0; r < 2; r++) {
            check(cudaSetDevice(r), "cudaSetDevice");
            a[r] = new ncclComm();
            inProgress(ncclCommInitRankConfig(a[r], 2, uniqueId(id), r, config(0)), "ncclCommInitRankConfig");
        }
        for (int r = 0; r < 2; r++) {
            nccl(poll(a[r]), "making A");
        }
        for (int r = 0; r < 2; r++) {
            check(cudaSetDevice(r), "cudaSetDevice");
            b[r] = new ncclComm();
            inProgress(ncclCommSplit(a[r], 0, r, b[r], config(0)), "ncclCommSplit");
        }
        for (int r = 0; r < 2; r++) {
            nccl(poll(b[r]), "making B");
        }
        check(cudaSetDevice(0), "cudaSetDevice");
        CUstream_st sa = stream();
        CUstream_st sb = stream();
        Pointer x = upload(f32Bytes(new float[] {1}));
        nccl(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, a[0], sa), "ncclAllReduce A");
        Thread.sleep(200);   // A's collective holds the slot, waiting for rank 1
        nccl(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, b[0], sb), "ncclAllReduce B");
        Thread.sleep(300);
        int before = cudaStreamQuery(sb);   // cudaErrorNotReady: B waits for the slot
        long start = System.nanoTime();
        nccl(ncclCommAbort(b[0]), "ncclCommAbort B");
        int stream = cudaStreamSynchronize(sb);
        long ms = (System.nanoTime() - start) / 1_000_000;
        report("released before=" + before + " stream=" + stream + " ms=" + ms + " last=" + lastError(a[0]));
        nccl(ncclCommAbort(a[0]), "ncclCommAbort A");
        check(cudaStreamSynchronize(sa), "cudaStreamSynchronize");
    }

    /** Sleeps DELAY_MS on the device's host-function thread. */
    private static final class Sleep extends cudaHostFn_t {
        @Override
        public void call(Pointer userData) {
            try {
                Thread.sleep(DELAY_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static final Sleep SLEEP = new Sleep();

    // ------------------------------------------------------------------ inputs (the test computes from them too)

    /** Rank g's fp32 input: values in [-4, 4) with full mantissas, so the order of a sum shows. */
    static float[] inputF32(int seed, int n) {
        SplittableRandom r = new SplittableRandom(1_000_003L * seed + 17);
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (r.nextDouble() * 8 - 4);
        }
        return v;
    }

    static short[] inputBf16(int seed, int n) {
        float[] f = inputF32(seed + 50, n);
        short[] v = new short[n];
        for (int i = 0; i < n; i++) {
            v[i] = bf16(f[i]);
        }
        return v;
    }

    /** fp32 to bf16, rounding to nearest even (finite values). */
    static short bf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        return (short) ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16);
    }

    static float fromBf16(short b) {
        return Float.intBitsToFloat((b & 0xffff) << 16);
    }

    static byte[] f32Bytes(float[] v) {
        ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (float x : v) {
            b.putFloat(x);
        }
        return b.array();
    }

    static byte[] bf16Bytes(short[] v) {
        ByteBuffer b = ByteBuffer.allocate(2 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (short x : v) {
            b.putShort(x);
        }
        return b.array();
    }

    // ------------------------------------------------------------------ NCCL and CUDA, checked

    /** A non-blocking config, as NCCL_CONFIG_INITIALIZER fills its header. */
    static ncclConfig_t config(int blocking) {
        ncclConfig_t c = new ncclConfig_t();
        c.size(Loader.sizeof(ncclConfig_t.class)).magic(0xcafebeef).version(NCCL_VERSION_CODE).blocking(blocking);
        return c;
    }

    static ncclUniqueId uniqueId(byte[] bytes) {
        ncclUniqueId id = new ncclUniqueId();
        new BytePointer(id).capacity(bytes.length).put(bytes, 0, bytes.length);
        return id;
    }

    /** ncclCommInitRankConfig, non-blocking: ncclInProgress at once, then polled until made. */
    private static ncclComm init(byte[] id, int nranks, int rank) {
        ncclComm c = new ncclComm();
        inProgress(ncclCommInitRankConfig(c, nranks, uniqueId(id), rank, config(0)), "rank " + rank + ": ncclCommInitRankConfig");
        int e = poll(c);
        if (e != 0) {
            throw new AssertionError("rank " + rank + ": making the communicator failed: " + e + ": " + lastError(c));
        }
        return c;
    }

    private static ncclComm split(ncclComm parent, int color, int key) {
        ncclComm c = new ncclComm();
        inProgress(ncclCommSplit(parent, color, key, c, config(0)), "ncclCommSplit");
        int e = poll(c);
        if (e != 0) {
            throw new AssertionError("the split failed: " + e + ": " + lastError(c));
        }
        return c;
    }

    /** Polls ncclCommGetAsyncError until it no longer says ncclInProgress (30 s at most). */
    static int poll(ncclComm c) {
        long end = System.nanoTime() + 30_000_000_000L;
        int e;
        do {
            e = asyncError(c);
            if (e != ncclInProgress) {
                return e;
            }
            Thread.onSpinWait();
            try {
                Thread.sleep(1);
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                return e;
            }
        } while (System.nanoTime() < end);
        return e;
    }

    static int asyncError(ncclComm c) {
        int[] e = new int[1];
        nccl(ncclCommGetAsyncError(c, e), "ncclCommGetAsyncError");
        return e[0];
    }

    static String lastError(ncclComm c) {
        BytePointer p = ncclGetLastError(c);
        return p == null ? "" : p.getString().replace('\n', ' ');
    }

    private static CUstream_st stream() {
        CUstream_st s = new CUstream_st();
        check(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        return s;
    }

    private static Pointer malloc(long bytes) {
        Pointer p = new Pointer();
        check(cudaMalloc(p, bytes), "cudaMalloc");
        return p;
    }

    private static Pointer upload(byte[] bytes) {
        Pointer p = malloc(bytes.length);
        try (BytePointer host = new BytePointer(bytes)) {
            check(cudaMemcpy(p, host, bytes.length, cudaMemcpyHostToDevice), "cudaMemcpy");
        }
        return p;
    }

    private static byte[] download(Pointer p, long bytes) {
        byte[] out = new byte[(int) bytes];
        try (BytePointer host = new BytePointer(bytes)) {
            check(cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
            host.get(out);
        }
        return out;
    }

    private static void check(int rc, String what) {
        if (rc != 0) {
            throw new AssertionError(what + " returned " + rc);
        }
    }

    private static void inProgress(int rc, String what) {
        if (rc != ncclInProgress) {
            BytePointer last = ncclGetLastError(null);
            throw new AssertionError(what + " returned " + rc + ", not ncclInProgress: " + (last == null ? "" : last.getString()));
        }
    }

    private static void nccl(int rc, String what) {
        if (rc != 0) {
            BytePointer last = ncclGetLastError(null);
            throw new AssertionError(what + " returned " + rc + ": " + (last == null ? "" : last.getString()));
        }
    }

    // ------------------------------------------------------------------ processes

    /** Process 0 makes the unique id and publishes it as a file; the others read it. */
    static byte[] shareId(Path dir, String name, int process) throws IOException, InterruptedException {
        Path file = dir.resolve(name + ".id");
        if (process == 0) {
            ncclUniqueId id = new ncclUniqueId();
            nccl(ncclGetUniqueId(id), "ncclGetUniqueId");
            byte[] bytes = new byte[NativeNccl.UNIQUE_ID_BYTES];
            new BytePointer(id).capacity(bytes.length).get(bytes, 0, bytes.length);
            Path tmp = dir.resolve(name + ".id.tmp");
            Files.write(tmp, bytes);
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE);
            return bytes;
        }
        awaitFile(file);
        return Files.readAllBytes(file);
    }

    private static void barrier(Path dir, int process, int processes) throws IOException, InterruptedException {
        Files.writeString(dir.resolve("loaded-" + process), "");
        for (int p = 0; p < processes; p++) {
            awaitFile(dir.resolve("loaded-" + p));
        }
    }

    static void awaitFile(Path file) throws InterruptedException {
        long end = System.nanoTime() + 60_000_000_000L;
        while (!Files.exists(file)) {
            if (System.nanoTime() > end) {
                throw new AssertionError("waited 60 s for " + file);
            }
            Thread.sleep(5);
        }
    }

    @FunctionalInterface
    interface RankBody {
        byte[] run(int rank) throws Exception;
    }

    /** Runs each rank on its own thread (each with its own current device, as the runtime does). */
    static Map<Integer, byte[]> onThreads(List<Integer> ranks, RankBody body) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(ranks.size());
        try {
            Map<Integer, Future<byte[]>> futures = new TreeMap<>();
            for (int g : ranks) {
                futures.put(g, pool.submit(() -> body.run(g)));
            }
            Map<Integer, byte[]> out = new TreeMap<>();
            for (Map.Entry<Integer, Future<byte[]>> f : futures.entrySet()) {
                out.put(f.getKey(), f.getValue().get());
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    static synchronized void report(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
