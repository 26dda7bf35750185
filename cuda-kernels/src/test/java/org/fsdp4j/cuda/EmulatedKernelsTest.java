// Every CUDA kernel, run without a GPU on the CUDA execution emulator (src/test/emulator): each
// case launches through the real launcher (its grid, block and arguments) and is checked against
// an fp64 reference with a derived error bound, under five schedules (threads and blocks in
// ascending, descending and random order, grid-stride launches on 1 and 3 blocks) whose results
// must be bit-identical, then again under AddressSanitizer + UBSan. Without g++ the emulator
// tests skip with the reason; the coverage check (every extern "C" kernel has a case) runs anyway.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

@Tag("emulator")
class EmulatedKernelsTest {

    static final long SEED = System.nanoTime();

    /** Every case of every kernel file (a new kernel file's cases are one more line here). */
    static List<EmuCase> cases() {
        Random r = new Random(SEED);
        List<EmuCase> all = new ArrayList<>();
        all.addAll(AttentionCases.cases(r));
        all.addAll(CastCases.cases(r));
        all.addAll(CrossEntropyCases.cases(r));
        all.addAll(ElementwiseCases.cases(r));
        all.addAll(EmbeddingCases.cases(r));
        all.addAll(GeluCases.cases(r));
        all.addAll(LayerNormCases.cases(r));
        all.addAll(OptimizerCases.cases(r));
        all.addAll(ReductionCases.cases(r));
        all.addAll(RmsNormCases.cases(r));
        all.addAll(RopeCases.cases(r));
        all.addAll(SwigluCases.cases(r));
        all.addAll(EmulatorSelfTestCases.cases(r));
        return all;
    }

    private static final ExecutorService RUNS =
            Executors.newFixedThreadPool(Math.min(4, Runtime.getRuntime().availableProcessors()));

    @AfterAll
    static void stopRuns() {
        RUNS.shutdownNow();
    }

    @Test
    void everyKernelHasACase() {
        List<EmuCase> cases = cases();
        Set<String> names = new HashSet<>();
        TreeSet<String> covered = new TreeSet<>();
        for (EmuCase c : cases) {
            assertTrue(names.add(c.name), "two cases named " + c.name);
            assertTrue(c.launchesSubjects(), c.name + " does not launch all of " + c.subjects);
            covered.addAll(c.subjects);
        }
        TreeSet<String> missing = new TreeSet<>(EmuDevice.KERNELS.keySet());
        missing.removeAll(covered);
        assertEquals(new TreeSet<>(), missing, "kernels without an emulator case (add one to their *Cases class)");
    }

    @TestFactory
    Stream<DynamicTest> everyKernelInEverySchedule() {
        return runAll(EmuToolchain.Flavor.PLAIN, EmuRunner.ALL_SCHEDULES);
    }

    @TestFactory
    Stream<DynamicTest> everyKernelUnderAddressAndUndefinedBehaviourSanitizers() {
        return runAll(EmuToolchain.Flavor.SANITIZED, EmuRunner.ALL_SCHEDULES);
    }

    private Stream<DynamicTest> runAll(EmuToolchain.Flavor flavor, String schedules) {
        return EmuToolchain.unlessUnavailable(() -> runAllHere(flavor, schedules));
    }

    private Stream<DynamicTest> runAllHere(EmuToolchain.Flavor flavor, String schedules) {
        long start = System.nanoTime();
        Path runner = EmuToolchain.runner(flavor);
        double buildS = (System.nanoTime() - start) / 1e9;
        List<EmuCase> cases = cases();
        List<CompletableFuture<EmuRunner.Result>> results = new ArrayList<>();
        for (EmuCase c : cases) {
            results.add(CompletableFuture.supplyAsync(() -> EmuRunner.run(runner, c, schedules, SEED), RUNS));
        }
        CompletableFuture.allOf(results.toArray(CompletableFuture[]::new)).thenRun(() -> {
            int slowest = 0;
            for (int i = 1; i < cases.size(); i++) {
                slowest = results.get(i).join().seconds() > results.get(slowest).join().seconds() ? i : slowest;
            }
            System.out.printf("[emulator] %s: %d cases under %s in %.1f s (build %.1f s; slowest %.1f s: %s)%n",
                    flavor, cases.size(), schedules, (System.nanoTime() - start) / 1e9 - buildS, buildS,
                    results.get(slowest).join().seconds(), cases.get(slowest).name);
        });
        return Stream.iterate(0, i -> i < cases.size(), i -> i + 1).map(i -> DynamicTest.dynamicTest(
                cases.get(i).name, () -> {
                    EmuRunner.Result r = results.get(i).join();
                    assertTrue(r.ok(), () -> cases.get(i).name + " (seed " + SEED + "): exit " + r.exitCode() + "\n"
                            + r.messages());
                    cases.get(i).verify(r.image(), SEED);
                }));
    }
}
