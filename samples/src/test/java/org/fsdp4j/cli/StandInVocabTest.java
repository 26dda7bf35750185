// `fsdp4j train --device cuda` on the stand-in CUDA at GPT-2's vocabulary (issue 45 item 5): a
// tiny GPT with V = 50,257 trains a few steps through the CUDA kernels (the embedding backward's
// grouping, the 50,257-wide cross-entropy rows, the tied head's GEMMs on cuBLAS's padded copies)
// to the CPU backend's losses step for step, within fp32's tolerance, and the losses fall. Runs
// only in the fake-GPU run (tag "standin").
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("standin")
class StandInVocabTest {

    private static final List<String> RUN = List.of("--vocab", "50257", "--layers", "1", "--hidden", "32", "--heads",
            "2", "--steps", "3", "--batch-size", "2", "--seq-len", "16", "--lr", "1e-2");

    @TempDir
    Path dir;

    @Test
    void gptAtGpt2sVocabularyTrainsToTheCpusLosses() throws IOException {
        StandIns.assumeStandIns();
        float[] onCpu = losses(train("cpu", "cpu"));
        float[] onGpu = losses(train("cuda", "cuda"));
        assertEquals(onCpu.length, onGpu.length);
        // as StandInTrainTest's fp32 runs: other summation orders, a few ulps per step compounded
        for (int s = 0; s < onCpu.length; s++) {
            assertTrue(Float.isFinite(onGpu[s]), Arrays.toString(onGpu));
            assertEquals(onCpu[s], onGpu[s], 1e-5 * Math.abs(onCpu[s]), "step " + (s + 1));
        }
        assertTrue(onGpu[onGpu.length - 1] < onGpu[0], "the loss falls: " + Arrays.toString(onGpu));
        System.out.println("stand-in V = 50,257: losses " + Arrays.toString(onGpu) + " vs cpu "
                + Arrays.toString(onCpu));
    }

    private Path train(String name, String device) {
        Path out = dir.resolve(name);
        List<String> all = new ArrayList<>(List.of("train", "--device", device));
        all.addAll(RUN);
        all.addAll(List.of("--out", out.toString()));
        CliRunner.Result r = CliRunner.run(all.toArray(String[]::new));
        assertEquals(0, r.exitCode(), String.join(" ", all) + ":\n" + r.out() + r.err());
        return out;
    }

    private static float[] losses(Path out) throws IOException {
        return MultiProcessCommandTest.losses(out.resolve("summary.json"));
    }
}
