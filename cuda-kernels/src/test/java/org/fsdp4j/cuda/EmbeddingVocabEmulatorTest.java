// Issue 45 item 5 on the emulator: the embedding backward at real vocabularies (GPT-2's 50,257,
// Llama's 32,000) with repeated ids, checked against the fp64 reference in every schedule, and
// two planted faults in the dwte path, each a way to lose a repeated id, that those cases catch:
// the per-row sum keeping only a token's first position, and the grouping giving every repeat of
// a token within a tile the same slot.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.fsdp4j.api.DType;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;

@Tag("emulator")
class EmbeddingVocabEmulatorTest {

    private static final long SEED = System.nanoTime();

    /** B·T = 600 (three tiles of the grouping kernel) over 40 ids, and 520 positions of one id. */
    private static List<EmuCase> cases() {
        Random r = new Random(SEED);
        return List.of(EmbeddingCases.backward(r, DType.F32, DType.F32, 2, 300, 24, 50_257, 40),
                EmbeddingCases.backward(r, DType.BF16, DType.F32, 1, 520, 16, 32_000, 1));
    }

    private static final List<EmulatorPlantedFaultsTest.Fault> FAULTS = List.of(
            new EmulatorPlantedFaultsTest.Fault("dwte keeps one position per token", "embedding.cu",
                    "for (int k = lo; k < hi; k++)", "for (int k = lo; k < lo + 1; k++)",
                    "embedding_backward_wte_kernel", EmuToolchain.Flavor.PLAIN, 0, ""),
            new EmulatorPlantedFaultsTest.Fault("repeats in a tile share a slot", "embedding.cu",
                    "order[cursor[tok] + before] = (int)p;", "order[cursor[tok]] = (int)p;",
                    "embedding_group_kernel", EmuToolchain.Flavor.PLAIN, 0, ""));

    @TestFactory
    Stream<DynamicTest> realVocabulariesWithRepeatedIdsMatchTheReference() {
        return EmuToolchain.unlessUnavailable(() -> {
            Path runner = EmuToolchain.runner(EmuToolchain.Flavor.PLAIN);
            return cases().stream().map(c -> DynamicTest.dynamicTest(c.name, () -> {
                EmuRunner.Result r = EmuRunner.run(runner, c, EmuRunner.ALL_SCHEDULES, SEED);
                assertTrue(r.ok(), () -> c.name + " (seed " + SEED + "): exit " + r.exitCode() + "\n" + r.messages());
                c.verify(r.image(), SEED);
            }));
        });
    }

    @TestFactory
    Stream<DynamicTest> aDroppedRepeatIsCaught() {
        return EmuToolchain.unlessUnavailable(() -> FAULTS.stream().map(f -> DynamicTest.dynamicTest(f.name(), () -> {
            Path runner = EmuToolchain.runner(f.flavor(), EmulatorPlantedFaultsTest.plant(f));
            for (EmuCase c : cases()) {
                EmuRunner.Result r = EmuRunner.run(runner, c, "asc", SEED);
                assertTrue(r.ok(), () -> c.name + ": exit " + r.exitCode() + "\n" + r.messages());
                assertThrows(AssertionError.class, () -> c.verify(r.image(), SEED),
                        "planted fault '" + f.name() + "' not caught by " + c.name);
            }
        })));
    }
}
