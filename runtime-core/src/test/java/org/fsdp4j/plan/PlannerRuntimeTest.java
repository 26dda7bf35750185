// The preflight's memory estimate against the tracker's measured peak of a real first step:
// within 20% for the presets the issue names, at one rank and at four.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class AnalyticStepCostTest {

    @ParameterizedTest(name = "{0} at N = {1}")
    @CsvSource({"tiny, 1", "tiny, 4", "small, 1", "small, 4", "bench-4x256, 1", "bench-4x256, 4"})
    void estimateIsWithinTwentyPercentOfTheMeasuredPeak(String preset, int worldSize) {
        TrainConfig config = TrainConfig.builder().preset(preset).worldSize(worldSize).batchSize(4).steps(1)
                .device("cpu").cpuThreads(2).build();
        assertWithin(0.20, config);
    }

    private static void assertWithin(double tolerance, TrainConfig config) {
        StepCost estimate = new Planner().estimate(config);
        long measured;
        try (Trainer trainer = new Trainer(config, line -> { })) {
            trainer.step();
            measured = Arrays.stream(trainer.summary().peakBytesPerRank()).max().orElseThrow();
        }
        double error = (double) estimate.peakBytesPerRank() / measured - 1;
        assertTrue(Math.abs(error) <= tolerance, config.preset() + " at N = " + config.worldSize() + ": estimate "
                + estimate.peakBytesPerRank() + " B vs measured peak " + measured + " B (" + Math.round(100 * error) + "%)");
    }
}
