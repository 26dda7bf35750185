// The stand-in NCCL across processes, as the runtime will use it: child JVMs (StandInNcclChild)
// call JavaCPP's NCCL and CUDA runtime directly and meet through the unique id process 0 leaves in
// a file. Two processes of two ranks make one communicator (non-blocking, polled) whose every
// collective gives the stand-in's arithmetic bit for bit (computed here, and the same job in one
// process gives the same bytes), and split it across processes; two processes on one device are
// refused; kill -9 of a process, ncclCommAbort in a process, and the death of the process whose
// hub a join waits at each give the other process ncclRemoteError within seconds; a stopped
// process makes it wait until the stand-in's timeout (ncclSystemError); ncclCommAbort on a
// communicator still being made releases the other ranks of its init. And the kernel-slot model:
// with one slot, two communicators that two ranks' streams reach in opposite orders deadlock
// (ncclSystemError after the stand-in's timeout), unless NCCL_LAUNCH_ORDER_IMPLICIT starts a
// device's collectives in the order they were issued; ncclCommAbort releases a collective waiting
// for a slot. Fake-GPU run only (tag "standin", four stand-in devices); skipped with the reason
// elsewhere.
package org.fsdp4j.nccl;

import static org.bytedeco.cuda.global.cudart.cudaSetDevice;
import static org.bytedeco.cuda.global.nccl.ncclCommAbort;
import static org.bytedeco.cuda.global.nccl.ncclCommDestroy;
import static org.bytedeco.cuda.global.nccl.ncclCommInitRankConfig;
import static org.fsdp4j.nccl.StandInNcclChild.COUNT;
import static org.fsdp4j.nccl.StandInNcclChild.ROOT;
import static org.fsdp4j.nccl.StandInNcclChild.SECTIONS;
import static org.fsdp4j.nccl.StandInNcclChild.asyncError;
import static org.fsdp4j.nccl.StandInNcclChild.bf16;
import static org.fsdp4j.nccl.StandInNcclChild.bf16Bytes;
import static org.fsdp4j.nccl.StandInNcclChild.config;
import static org.fsdp4j.nccl.StandInNcclChild.f32Bytes;
import static org.fsdp4j.nccl.StandInNcclChild.fromBf16;
import static org.fsdp4j.nccl.StandInNcclChild.inputBf16;
import static org.fsdp4j.nccl.StandInNcclChild.inputF32;
import static org.fsdp4j.nccl.StandInNcclChild.lastError;
import static org.fsdp4j.nccl.StandInNcclChild.poll;
import static org.fsdp4j.nccl.StandInNcclChild.uniqueId;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.bytedeco.cuda.nccl.ncclComm;
import org.fsdp4j.cuda.CudaProbe;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("standin")
class StandInNcclProcessesTest {

    private static final int NCCL_SYSTEM_ERROR = 2;
    private static final int NCCL_INVALID_ARGUMENT = 4;
    private static final int NCCL_INVALID_USAGE = 5;
    private static final int NCCL_REMOTE_ERROR = 6;
    private static final int NCCL_IN_PROGRESS = 7;
    private static final int CUDA_ERROR_NOT_READY = 600;
    /**
     * "Promptly": the stand-in notices within milliseconds; without the notice a rank would wait out
     * the children's 30 s polls. The bound leaves room for a loaded 2-core CI machine.
     */
    private static final double PROMPT_S = 5;

    @TempDir
    Path dir;

    private final List<Process> started = new ArrayList<>();

    @BeforeEach
    void standIns() {
        CudaProbe.Result probe = StandIns.assumeStandIns();
        assumeTrue(probe.deviceCount() >= 4, "needs four stand-in devices: " + probe.describe());
    }

    @AfterEach
    void killLeftovers() {
        for (Process p : started) {
            p.destroyForcibly();
        }
    }

    @Test
    void twoProcessesOfTwoRanksGiveTheInProcessArithmeticBitForBit() throws Exception {
        Path apart = Files.createDirectories(dir.resolve("apart"));
        List<Child> children = List.of(start("collectives", apart, 0, 2, 2, Map.of()),
                start("collectives", apart, 1, 2, 2, Map.of()));
        Path here = Files.createDirectories(dir.resolve("here"));
        Map<Integer, byte[]> oneProcess = StandInNcclChild.collectives(here, 0, 1, 4);   // meanwhile, in this JVM
        for (Child c : children) {
            c.await("done", 60);
            assertEquals(0, c.exit(30), c.stderr());
        }
        for (int g = 0; g < 4; g++) {
            List<byte[]> want = expected(g, 4);
            List<byte[]> twoProcesses = sections(Files.readAllBytes(apart.resolve("collectives-rank" + g + ".bin")), 4);
            List<byte[]> inOne = sections(oneProcess.get(g), 4);
            for (int s = 0; s < SECTIONS.size(); s++) {
                assertArrayEquals(want.get(s), twoProcesses.get(s), "rank " + g + ", " + SECTIONS.get(s) + ", 2 x 2 ranks");
                assertArrayEquals(want.get(s), inOne.get(s), "rank " + g + ", " + SECTIONS.get(s) + ", 1 x 4 ranks");
            }
        }
        // The data tells the orders apart, so the checks above would see a sum in another rank order.
        float[][] a = new float[4][];
        for (int r = 0; r < 4; r++) {
            a[3 - r] = inputF32(r, COUNT);
        }
        assertFalse(Arrays.equals(f32Bytes(sumF32(a, false)), expected(0, 4).get(0)), "rank order shows in the sums");
    }

    @Test
    void twoProcessesOnOneDeviceAreRefused() throws Exception {
        List<Child> children = List.of(start("duplicate", dir, 0, 2, 1, Map.of()), start("duplicate", dir, 1, 2, 1, Map.of()));
        for (Child c : children) {
            Map<String, String> init = c.await("init", 60);
            assertEquals(NCCL_IN_PROGRESS, Integer.parseInt(init.get("rc")), init.toString());
            assertEquals(NCCL_INVALID_USAGE, Integer.parseInt(init.get("error")), init.toString());
            assertTrue(init.get("last").contains("Duplicate GPU detected") && init.get("last").contains("CUDA device 0"),
                    init.toString());
            assertEquals(0, c.exit(30), c.stderr());
        }
    }

    @Test
    void killingAProcessMidCollectiveFailsTheOtherPromptly() throws Exception {
        Child waiter = start("kill", dir, 0, 2, 1, Map.of());
        Child victim = start("kill", dir, 1, 2, 1, Map.of());
        victim.await("ready", 60);
        assertEquals("0", waiter.await("waiting", 60).get("error"), "nothing failed before the kill");
        long killed = System.nanoTime();
        victim.process.destroyForcibly();   // SIGKILL
        Map<String, String> result = waiter.await("result", 30);
        double seconds = (System.nanoTime() - killed) / 1e9;
        assertEquals(NCCL_REMOTE_ERROR, Integer.parseInt(result.get("error")), result.toString());
        assertTrue(seconds < PROMPT_S, "noticed " + seconds + " s after the kill");
        assertEquals("0", result.get("stream"), "the stream goes on: " + result);
        assertTrue(result.get("last").contains("gone"), result.toString());
        assertEquals(0, waiter.exit(30), waiter.stderr());
    }

    @Test
    void aStoppedProcessMakesTheOtherWaitUntilTheTimeout() throws Exception {
        Map<String, String> env = Map.of("FSDP4J_STANDIN_NCCL_TIMEOUT_S", "3");
        Child waiter = start("kill", dir, 0, 2, 1, env);
        Child stopped = start("kill", dir, 1, 2, 1, env);
        stopped.await("ready", 60);
        assertEquals("0", waiter.await("waiting", 60).get("error"));
        assertEquals(0, new ProcessBuilder("kill", "-STOP", Long.toString(stopped.process.pid())).start().waitFor());
        Map<String, String> result = waiter.await("result", 30);
        assertEquals(NCCL_SYSTEM_ERROR, Integer.parseInt(result.get("error")), "as NCCL hangs, then the timeout: " + result);
        // its collective started 0.2 s before it began to poll: the rest of the 3 s timeout
        assertTrue(Long.parseLong(result.get("ms")) > 2500, "waited out the 3 s timeout: " + result);
        assertTrue(result.get("last").contains("did not all reach it in 3 s"), result.toString());
        assertEquals(0, waiter.exit(30), waiter.stderr());
    }

    @Test
    void ncclCommAbortOnACommunicatorStillBeingMadeReleasesTheOtherRanksOfItsInit() throws Exception {
        byte[] id = StandInNcclChild.shareId(dir, "unmade", 0);
        ncclComm[] comms = new ncclComm[2];
        try {
            for (int r = 0; r < 2; r++) {   // ranks 0 and 1 of 3 in this JVM; rank 2 never comes
                assertEquals(0, cudaSetDevice(r));
                comms[r] = new ncclComm();
                assertEquals(NCCL_IN_PROGRESS, ncclCommInitRankConfig(comms[r], 3, uniqueId(id), r, config(0)));
            }
        } finally {
            cudaSetDevice(0);
        }
        Thread.sleep(100);
        assertEquals(NCCL_IN_PROGRESS, asyncError(comms[1]), "still waiting for rank 2");
        long abort = System.nanoTime();
        assertEquals(0, ncclCommAbort(comms[0]));
        int e = poll(comms[1]);
        double seconds = (System.nanoTime() - abort) / 1e9;
        assertEquals(NCCL_REMOTE_ERROR, e, lastError(comms[1]));
        assertTrue(lastError(comms[1]).contains("rank 0") && lastError(comms[1]).contains("ncclCommAbort"),
                lastError(comms[1]));
        assertTrue(seconds < PROMPT_S, "released " + seconds + " s after the abort");
        assertEquals(0, ncclCommDestroy(comms[1]));
    }

    @Test
    void theDeathOfTheHubsProcessFailsAJoinWaitingThere() throws Exception {
        Child hub = start("hub-dies", dir, 0, 2, 1, Map.of());
        Child joiner = start("hub-dies", dir, 1, 2, 1, Map.of());
        hub.await("ready", 60);
        Map<String, String> joining = joiner.await("initializing", 60);
        assertEquals(NCCL_IN_PROGRESS, Integer.parseInt(joining.get("rc")), "non-blocking: " + joining);
        assertEquals(NCCL_INVALID_ARGUMENT, Integer.parseInt(joining.get("badConfig")), "a config's magic: " + joining);
        assertEquals(NCCL_INVALID_USAGE, Integer.parseInt(joining.get("allReduce")), "a collective while making: " + joining);
        assertEquals(NCCL_INVALID_USAGE, Integer.parseInt(joining.get("count")), "ncclCommCount while making: " + joining);
        assertEquals(NCCL_IN_PROGRESS, Integer.parseInt(joining.get("asyncError")), joining.toString());
        long killed = System.nanoTime();
        hub.process.destroyForcibly();
        Map<String, String> result = joiner.await("result", 30);
        double seconds = (System.nanoTime() - killed) / 1e9;
        assertEquals(NCCL_REMOTE_ERROR, Integer.parseInt(result.get("error")), result.toString());
        assertTrue(seconds < PROMPT_S, "noticed " + seconds + " s after the kill");
        assertTrue(result.get("last").contains("hub"), result.toString());
        assertEquals(0, joiner.exit(30), joiner.stderr());
    }

    @Test
    void ncclCommAbortInOneProcessReleasesTheOther() throws Exception {
        Child aborter = start("abort", dir, 0, 2, 1, Map.of());
        Child waiter = start("abort", dir, 1, 2, 1, Map.of());
        aborter.await("ready", 60);
        assertEquals("0", waiter.await("waiting", 60).get("error"));
        Files.writeString(dir.resolve("go"), "");
        assertEquals("0", aborter.await("aborted", 30).get("rc"));
        long aborted = System.nanoTime();
        Map<String, String> result = waiter.await("result", 30);
        double seconds = (System.nanoTime() - aborted) / 1e9;
        Files.writeString(dir.resolve("done"), "");   // the aborting process stays alive until here
        assertEquals(NCCL_REMOTE_ERROR, Integer.parseInt(result.get("error")), result.toString());
        assertTrue(seconds < PROMPT_S, "released " + seconds + " s after the abort");
        assertEquals("0", result.get("stream"), "the stream goes on: " + result);
        assertTrue(result.get("last").contains("ncclCommAbort at rank 0"), result.toString());
        assertEquals(0, waiter.exit(30), waiter.stderr());
        assertEquals(0, aborter.exit(30), aborter.stderr());
    }

    @Test
    void withOneKernelSlotCommunicatorsReachedInOppositeOrdersDeadlock() throws Exception {
        List<Map<String, String>> results = order(Map.of());
        boolean deadlocked = false;
        for (Map<String, String> r : results) {
            deadlocked |= Integer.parseInt(r.get("c1")) == NCCL_SYSTEM_ERROR || Integer.parseInt(r.get("c2")) == NCCL_SYSTEM_ERROR;
        }
        assertTrue(deadlocked, "no rank timed out: " + results);
        assertTrue(results.stream().anyMatch(r -> Long.parseLong(r.get("ms")) >= 4500), "after the 5 s timeout: " + results);
    }

    @Test
    void implicitLaunchOrderStartsThemInIssueOrder() throws Exception {
        for (Map<String, String> r : order(Map.of("NCCL_LAUNCH_ORDER_IMPLICIT", "1"))) {
            assertEquals("0", r.get("c1"), r.toString());
            assertEquals("0", r.get("c2"), r.toString());
            assertEquals(3f, Float.parseFloat(r.get("sum1")), r.toString());
            assertEquals(3f, Float.parseFloat(r.get("sum2")), r.toString());
        }
    }

    @Test
    void ncclCommAbortReleasesACollectiveWaitingForAKernelSlot() throws Exception {
        Child c = start("slot-abort", dir, 0, 1, 2, Map.of("FSDP4J_STANDIN_NCCL_SLOTS", "1",
                "FSDP4J_STANDIN_NCCL_TIMEOUT_S", "30"));
        Map<String, String> released = c.await("released", 60);
        assertEquals(CUDA_ERROR_NOT_READY, Integer.parseInt(released.get("before")), "it waited: " + released);
        assertEquals("0", released.get("stream"), released.toString());
        assertTrue(Long.parseLong(released.get("ms")) < PROMPT_S * 1000, "not after the slot's holder: " + released);
        assertTrue(released.get("last").contains("was aborted (ncclCommAbort at rank 0"), released.toString());
        assertEquals(0, c.exit(30), c.stderr());
    }

    /** The launch-order scenario with one kernel slot per device and a 5 s stand-in timeout. */
    private List<Map<String, String>> order(Map<String, String> env) throws Exception {
        Map<String, String> all = new HashMap<>(env);
        all.put("FSDP4J_STANDIN_NCCL_SLOTS", "1");
        all.put("FSDP4J_STANDIN_NCCL_TIMEOUT_S", "5");
        List<Child> children = List.of(start("order", dir, 0, 2, 1, all), start("order", dir, 1, 2, 1, all));
        List<Map<String, String>> results = new ArrayList<>();
        for (Child c : children) {
            results.add(c.await("result", 60));
            assertEquals(0, c.exit(30), c.stderr());
        }
        System.out.println("launch order " + env + ": " + results);
        return results;
    }

    // ------------------------------------------------------------------ the arithmetic, independently

    /** What rank g of nranks must hold after StandInNcclChild.collectives, section by section. */
    private static List<byte[]> expected(int g, int nranks) {
        int n = COUNT;
        float[][] a = new float[nranks][];
        float[][] a4 = new float[nranks][];
        short[][] b = new short[nranks][];
        short[][] b4 = new short[nranks][];
        for (int r = 0; r < nranks; r++) {
            a[r] = inputF32(r, n);
            a4[r] = Arrays.copyOfRange(inputF32(100 + r, nranks * n), g * n, (g + 1) * n);   // rank g's chunk
            b[r] = inputBf16(r, n);
            b4[r] = Arrays.copyOfRange(inputBf16(100 + r, nranks * n), g * n, (g + 1) * n);
        }
        float[] gathered = new float[nranks * n];
        for (int r = 0; r < nranks; r++) {
            System.arraycopy(a[r], 0, gathered, r * n, n);
        }
        // The split: color g % 2, key -g, so each half in descending global rank.
        List<Integer> half = new ArrayList<>();
        for (int r = nranks - 1; r >= 0; r--) {
            if (r % 2 == g % 2) {
                half.add(r);
            }
        }
        float[][] halfInputs = new float[half.size()][];
        for (int i = 0; i < half.size(); i++) {
            halfInputs[i] = a[half.get(i)];
        }
        ByteBuffer ids = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN);
        ids.putInt(half.size()).putInt(half.indexOf(g)).putInt(g);
        return List.of(f32Bytes(sumF32(a, false)), f32Bytes(sumF32(a, true)), bf16Bytes(sumBf16(b, false)),
                bf16Bytes(sumBf16(b, true)), f32Bytes(gathered), f32Bytes(sumF32(a4, false)), bf16Bytes(sumBf16(b4, true)),
                f32Bytes(inputF32(200 + ROOT, n)), f32Bytes(sumF32(halfInputs, false)), ids.array());
    }

    /** In rank order, rounded to fp32 after each step; the average multiplies each input by 1/N first. */
    private static float[] sumF32(float[][] in, boolean avg) {
        double premul = (float) (1.0 / in.length);
        float[] out = new float[in[0].length];
        for (int i = 0; i < out.length; i++) {
            double acc = 0;
            for (int r = 0; r < in.length; r++) {
                double x = in[r][i];
                if (avg) {
                    x = (float) (x * premul);
                }
                acc = r == 0 ? x : (float) (acc + x);
            }
            out[i] = (float) acc;
        }
        return out;
    }

    /** The same in bf16: each step's double result to fp32, then to bf16 (round to nearest even). */
    private static short[] sumBf16(short[][] in, boolean avg) {
        double premul = fromBf16(bf16((float) (1.0 / in.length)));
        short[] out = new short[in[0].length];
        for (int i = 0; i < out.length; i++) {
            double acc = 0;
            for (int r = 0; r < in.length; r++) {
                double x = fromBf16(in[r][i]);
                if (avg) {
                    x = fromBf16(bf16((float) (x * premul)));
                }
                acc = r == 0 ? x : fromBf16(bf16((float) (acc + x)));
            }
            out[i] = bf16((float) acc);
        }
        return out;
    }

    private static List<byte[]> sections(byte[] all, int nranks) {
        int n = COUNT;
        int[] sizes = {4 * n, 4 * n, 2 * n, 2 * n, 4 * nranks * n, 4 * n, 2 * n, 4 * n, 4 * n, 12};
        assertEquals(Arrays.stream(sizes).sum(), all.length, "the bytes a rank wrote");
        List<byte[]> out = new ArrayList<>();
        int at = 0;
        for (int size : sizes) {
            out.add(Arrays.copyOfRange(all, at, at + size));
            at += size;
        }
        return out;
    }

    // ------------------------------------------------------------------ child JVMs

    /** A child JVM running one scenario; stdout lines queue up, stderr goes to a file. */
    private record Child(Process process, BlockingQueue<String> lines, Path err) {

        /** The first stdout line starting with {@code name}, as its key=value fields ("last" takes the rest). */
        Map<String, String> await(String name, long seconds) throws InterruptedException, IOException {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            for (;;) {
                String line = lines.poll(Math.max(1, end - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (line == null) {
                    throw new AssertionError("no '" + name + "' line within " + seconds + " s; stderr:\n" + stderr());
                }
                if (line.startsWith("failed")) {
                    throw new AssertionError("the child failed: " + line + "\n" + stderr());
                }
                if (line.equals(name) || line.startsWith(name + " ")) {
                    return fields(line.substring(name.length()).strip());
                }
            }
        }

        int exit(long seconds) throws InterruptedException {
            if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new AssertionError("the child did not end within " + seconds + " s");
            }
            return process.exitValue();
        }

        String stderr() {
            try {
                return Files.readString(err);
            } catch (IOException e) {
                return "(no stderr: " + e + ")";
            }
        }

        private static Map<String, String> fields(String text) {
            Map<String, String> out = new HashMap<>();
            int last = text.indexOf("last=");
            if (last >= 0) {
                out.put("last", text.substring(last + 5));
                text = text.substring(0, last);
            }
            for (String f : text.split(" ")) {
                int eq = f.indexOf('=');
                if (eq > 0) {
                    out.put(f.substring(0, eq), f.substring(eq + 1));
                }
            }
            return out;
        }
    }

    /** A child JVM as this one is: the stand-ins on JavaCPP's link path, four stand-in devices. */
    private Child start(String scenario, Path folder, int process, int processes, int perProcess, Map<String, String> env)
            throws IOException {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"),
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0"));
        for (String p : List.of("org.bytedeco.javacpp.platform.linkpath", "org.bytedeco.javacpp.cachedir", StandIns.PROPERTY)) {
            if (System.getProperty(p) != null) {
                cmd.add("-D" + p + "=" + System.getProperty(p));
            }
        }
        cmd.addAll(List.of(StandInNcclChild.class.getName(), scenario, folder.toString(), Integer.toString(process),
                Integer.toString(processes), Integer.toString(perProcess)));
        Path err = folder.resolve(scenario + "-" + process + ".err");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(err.toFile());
        pb.environment().keySet().removeIf(k -> k.startsWith("NCCL_") || k.startsWith("FSDP4J_STANDIN_NCCL_"));
        pb.environment().put("FSDP4J_STANDIN_DEVICES", "4");
        pb.environment().putAll(env);
        Process p = pb.start();
        started.add(p);
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String l = r.readLine(); l != null; l = r.readLine()) {
                    lines.add(l);
                }
            } catch (IOException ignored) {
                // the child ended
            }
        });
        reader.setDaemon(true);
        reader.start();
        return new Child(p, lines, err);
    }
}
