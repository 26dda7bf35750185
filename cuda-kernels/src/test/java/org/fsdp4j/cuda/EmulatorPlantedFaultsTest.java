// The emulator suite's teeth: three faults planted in a copy of src/main/cuda, each a classic GPU
// bug that a CPU reference test alone would not see, must make the cases of the kernel they sit
// in fail, in the way this emulator reports that kind of fault:
//   - a missing __syncthreads (block_sum reads the other warps' partials before they are written):
//     results that depend on the thread order;
//   - an off-by-one column bound (column_sums' last thread writes dbias[cols], one past the end,
//     and adds 0, so the values stay right): an AddressSanitizer report;
//   - a warp call skipped by some lanes (the causal softmax's max only in lanes that hold a key):
//     a divergent warp call.
// A fault whose text no longer appears in the sources fails loudly, so the suite cannot quietly
// lose a tooth when a kernel is edited: update the fault to the new code instead.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;

@Tag("emulator")
class EmulatorPlantedFaultsTest {

    /** runner.cc's exit status for results that differ between schedules (emu::EXIT_ORDER). */
    static final int EXIT_ORDER = 4;
    /** ... for a divergent barrier or warp call, or a deadlock (emu::EXIT_DIVERGENT). */
    static final int EXIT_DIVERGENT = 3;

    record Fault(String name, String file, String from, String to, String kernel, EmuToolchain.Flavor flavor,
                 int exitCode, String report) {
    }

    static final List<Fault> FAULTS = List.of(
            new Fault("missing barrier", "common.cuh",
                    "    if (lane == 0) scratch[warp] = v;\n    __syncthreads();\n    T total",
                    "    if (lane == 0) scratch[warp] = v;\n    T total",
                    "partial_sum_kernel", EmuToolchain.Flavor.PLAIN, EXIT_ORDER, "order-dependent result"),
            new Fault("column bound off by one", "common.cuh",
                    "if (threadIdx.y != 0 || c >= cols) return false;",
                    "if (threadIdx.y != 0 || c > cols) return false;",
                    "bias_backward_kernel", EmuToolchain.Flavor.SANITIZED, 1, "AddressSanitizer: heap-buffer-overflow"),
            new Fault("warp call skipped by some lanes", "attention.cu",
                    "    m = warp_max(m);\n",
                    "    if (lane <= t) m = warp_max(m);\n",
                    "causal_softmax_forward_kernel", EmuToolchain.Flavor.PLAIN, EXIT_DIVERGENT, "divergent warp call"));

    @TestFactory
    Stream<DynamicTest> everyPlantedFaultIsCaught() {
        return EmuToolchain.unlessUnavailable(() -> FAULTS.stream().map(
                f -> DynamicTest.dynamicTest(f.name + " in " + f.file, () -> caught(f))));
    }

    private static void caught(Fault f) throws IOException {
        Path sources = plant(f);
        Path runner = EmuToolchain.runner(f.flavor, sources);
        List<String> outcomes = new ArrayList<>();
        for (EmuCase c : EmulatedKernelsTest.cases()) {
            if (!c.subjects.contains(f.kernel)) {
                continue;
            }
            EmuRunner.Result r = EmuRunner.run(runner, c, EmuRunner.ALL_SCHEDULES, EmulatedKernelsTest.SEED);
            if (r.exitCode() == f.exitCode && r.messages().contains(f.report)) {
                return;
            }
            outcomes.add(c.name + ": exit " + r.exitCode() + (r.ok() ? "" : ", " + firstLine(r.messages())));
        }
        throw new AssertionError("planted fault '" + f.name + "' was not reported as '" + f.report + "' (exit "
                + f.exitCode + ") by any case of " + f.kernel + ":\n  " + String.join("\n  ", outcomes));
    }

    /** A copy of src/main/cuda with f planted; its text must occur exactly once. */
    static Path plant(Fault f) throws IOException {
        Path dir = EmuToolchain.BUILD_DIR.resolve("faults").resolve(f.name.replace(' ', '-'));
        Files.createDirectories(dir);
        try (Stream<Path> old = Files.list(dir)) {
            for (Path p : (Iterable<Path>) old::iterator) {
                Files.delete(p);
            }
        }
        try (Stream<Path> files = Files.list(KernelSources.MAIN)) {
            for (Path p : (Iterable<Path>) files::iterator) {
                Files.copy(p, dir.resolve(p.getFileName()));
            }
        }
        Path target = dir.resolve(f.file);
        String text = Files.readString(target);
        int at = text.indexOf(f.from);
        assertTrue(at >= 0, "fault '" + f.name + "': its code is no longer in " + f.file + "; plant it in the new code");
        assertEquals(-1, text.indexOf(f.from, at + 1), "fault '" + f.name + "': its code occurs twice in " + f.file);
        Files.writeString(target, text.substring(0, at) + f.to + text.substring(at + f.from.length()));
        return dir;
    }

    private static String firstLine(String s) {
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }
}
