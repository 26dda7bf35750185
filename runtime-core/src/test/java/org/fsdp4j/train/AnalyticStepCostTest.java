// The preflight's memory estimate against the tracker's measured peak of a real first step:
// within 20% for the presets the issue names, at one rank and at four, and for the Llama's.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.fsdp4j.model.ModelFamily;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class AnalyticStepCostTest {

    @ParameterizedTest(name = "{0} {1} at N = {2}")
    @CsvSource({"gpt, tiny, 1", "gpt, tiny, 4", "gpt, small, 1", "gpt, small, 4", "gpt, bench-4x256, 1",
        "gpt, bench-4x256, 4", "llama, tiny, 1", "llama, tiny, 4", "llama, small, 1"})
    void estimateIsWithinTwentyPercentOfTheMeasuredPeak(String family, String preset, int worldSize) {
        TrainConfig config = TrainConfig.builder().family(ModelFamily.parse(family)).preset(preset)
                .worldSize(worldSize).batchSize(4).steps(1).device("cpu").cpuThreads(2).build();
        assertWithin(0.20, config);
    }

    private static void assertWithin(double tolerance, TrainConfig config) {
        StepCost estimate = new AnalyticStepCost().estimate(config);
        long measured;
        try (Trainer trainer = new Trainer(config, line -> { })) {
            trainer.step();
            measured = Arrays.stream(trainer.summary().peakBytesPerRank()).max().orElseThrow();
        }
        double error = (double) estimate.peakBytesPerRank() / measured - 1;
        System.out.printf("%s %s at N = %d: estimate %d B, measured %d B (%+.1f%%)%n", config.model().family(),
                config.preset(), config.worldSize(), estimate.peakBytesPerRank(), measured, 100 * error);
        assertTrue(Math.abs(error) <= tolerance, config.preset() + " at N = " + config.worldSize() + ": estimate "
                + estimate.peakBytesPerRank() + " B vs measured peak " + measured + " B (" + Math.round(100 * error) + "%)");
    }
}
