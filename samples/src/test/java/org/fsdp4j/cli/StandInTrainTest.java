// `fsdp4j train --device cuda` on the stand-in CUDA, cuBLAS and NCCL (the fake-GPU run: two
// stand-in devices, random delays on every stream) reaches the losses of `--device cpu` step for
// step, within fp32's tolerance: one rank; two ranks sharing cuda:0 through the in-process group;
// two ranks on cuda:0 and cuda:1 through the stand-in NCCL; --offload (the host's CPU backend on
// pinned memory, copies with cudaMemcpyAsync); and bf16 compute against the CPU's bf16. The
// header says plainly that the device is a stand-in, and the preflight counts the backend's
// cuBLAS workspace. Runs only in the fake-GPU run (tag "standin").
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.fsdp4j.cuda.CudaProbe;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

@Tag("standin")
class StandInTrainTest {

    /** Enough steps for the optimizer's state to matter; small shapes, since kernels are emulated. */
    private static final List<String> RUN = List.of("--steps", "5", "--batch-size", "4", "--seq-len", "32");

    @TempDir
    Path dir;

    static Stream<Arguments> runs() {
        return Stream.of(
                Arguments.of("one rank", List.of("--device", "cuda"), List.of()),
                Arguments.of("two ranks sharing cuda:0", List.of("--device", "cuda:0", "--world-size", "2"),
                        List.of("--world-size", "2")),
                Arguments.of("two ranks over NCCL", List.of("--device", "cuda", "--world-size", "2"),
                        List.of("--world-size", "2")),
                Arguments.of("offload", List.of("--device", "cuda", "--offload"), List.of("--offload")),
                Arguments.of("bf16", List.of("--device", "cuda", "--param-dtype", "bf16"),
                        List.of("--param-dtype", "bf16")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("runs")
    void trainsToTheCpusLosses(String name, List<String> cuda, List<String> cpu) throws IOException {
        CudaProbe.Result probe = StandIns.assumeStandIns();
        float[] onCpu = losses(train("cpu-" + name, concat(List.of("--device", "cpu"), cpu)).out);
        Run onCuda = train("cuda-" + name, cuda);
        assertTrue(onCuda.log.contains("(" + CudaProbe.STAND_IN_NAME + ", sm_90"), "the header names the stand-in:\n"
                + onCuda.log);
        assertTrue(onCuda.log.contains("of it the backend's workspace"), "the preflight counts cuBLAS's workspace:\n"
                + onCuda.log);
        if (cuda.contains("cuda") && cuda.contains("--world-size")) {
            assertTrue(probe.deviceCount() >= 2, probe.describe());
            assertTrue(onCuda.log.contains("and one rank on each of cuda:1"), "one rank per GPU:\n" + onCuda.log);
        }
        for (int d = 0; d < probe.deviceCount(); d++) {
            assertEquals(0, deviceBytesInUse(d), name + ": cuda:" + d + " memory still allocated after the run");
        }
        float[] onGpu = losses(onCuda.out);
        // fp32: the stand-in's GEMMs and kernels sum in other orders than the CPU's; a few ulps of a
        // loss near 5 per step, compounded over 5 AdamW steps. bf16: both round activations to 8
        // significant bits (u = 2^-8) in different orders: a couple of u.
        double tol = cuda.contains("bf16") ? 2 * 0x1p-8 : 1e-5;
        assertEquals(onCpu.length, onGpu.length);
        for (int s = 0; s < onCpu.length; s++) {
            assertEquals(onCpu[s], onGpu[s], tol * Math.abs(onCpu[s]), name + ": step " + (s + 1));
        }
        System.out.println("stand-in " + name + ": losses " + java.util.Arrays.toString(onGpu) + " vs cpu "
                + java.util.Arrays.toString(onCpu));
    }

    @org.junit.jupiter.api.Test
    void oneRankPerGpuNeedsAGpuPerRank() {
        CudaProbe.Result probe = StandIns.assumeStandIns();
        int n = probe.deviceCount() + 1;
        CliRunner.Result r = CliRunner.run("train", "--device", "cuda", "--world-size", String.valueOf(n), "--steps", "1",
                "--batch-size", String.valueOf(n), "--seq-len", "8");
        assertEquals(1, r.exitCode(), r.out() + r.err());
        assertTrue(r.err().contains("runs one rank per GPU, but " + probe.deviceCount() + " GPUs are visible"), r.err());
    }

    /** What the stand-in device has handed out and not had back (cudaMemGetInfo's total − free). */
    private static long deviceBytesInUse(int device) {
        org.bytedeco.cuda.global.cudart.cudaSetDevice(device);
        try (org.bytedeco.javacpp.SizeTPointer free = new org.bytedeco.javacpp.SizeTPointer(1);
             org.bytedeco.javacpp.SizeTPointer total = new org.bytedeco.javacpp.SizeTPointer(1)) {
            assertEquals(0, org.bytedeco.cuda.global.cudart.cudaMemGetInfo(free, total));
            return total.get() - free.get();
        }
    }

    private record Run(Path out, String log) {
    }

    private Run train(String name, List<String> args) {
        Path out = dir.resolve(name.replace(' ', '-'));
        List<String> all = new ArrayList<>(List.of("train"));
        all.addAll(args);
        all.addAll(RUN);
        all.addAll(List.of("--out", out.toString()));
        CliRunner.Result r = CliRunner.run(all.toArray(String[]::new));
        assertEquals(0, r.exitCode(), String.join(" ", all) + ":\n" + r.out() + r.err());
        return new Run(out, r.out());
    }

    private static float[] losses(Path out) throws IOException {
        JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        float[] l = new float[s.get("losses").size()];
        for (int i = 0; i < l.length; i++) {
            l[i] = s.get("losses").get(i).floatValue();
        }
        return l;
    }

    private static List<String> concat(List<String> a, List<String> b) {
        List<String> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }
}
