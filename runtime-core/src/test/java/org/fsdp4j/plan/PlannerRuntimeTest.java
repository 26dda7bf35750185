// The planner against the runtime's own tracker, one real step each: its persistent prediction
// equals the measured bytes exactly, and its peak is within 10% of the measured peak, for the GPT's
// tiny and small at N = 1, 2 and 4, with and without activation checkpointing, and for the Llama's.
// These in-process fp32 ranks gather in place (no gathered buffers), and the run says so.
package org.fsdp4j.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.fsdp4j.model.ModelFamily;
import org.fsdp4j.train.MemoryCheck;

import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.Trainer;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class PlannerRuntimeTest {

    @ParameterizedTest(name = "{0} {1} at N = {2}, activation checkpointing {3}")
    @CsvSource({"gpt, tiny, 1, false", "gpt, tiny, 2, false", "gpt, tiny, 4, false", "gpt, tiny, 1, true",
        "gpt, tiny, 2, true", "gpt, tiny, 4, true", "gpt, small, 1, false", "gpt, small, 2, false", "gpt, small, 4, false",
        "gpt, small, 1, true", "gpt, small, 2, true", "gpt, small, 4, true",
        "llama, tiny, 1, false", "llama, tiny, 2, false", "llama, tiny, 4, false", "llama, tiny, 2, true",
        "llama, small, 1, false", "llama, small, 4, true"})
    void predictionMatchesTheMeasuredMemory(String family, String preset, int worldSize, boolean checkpointed) {
        TrainConfig config = TrainConfig.builder().family(ModelFamily.parse(family)).preset(preset).fsdp(f -> f.worldSize(worldSize))
                .batchSize(4).steps(1).fsdp(f -> f.activationCheckpointing(checkpointed).device("cpu").cpuThreads(2)).build();
        boolean inPlace = worldSize > 1;       // in-process CPU ranks, fp32 parameters, full_shard
        StepCost predicted = new Planner().estimate(config.planInput(), false, inPlace);
        MemoryCheck check;
        try (Trainer trainer = new Trainer(config, line -> { })) {
            trainer.step();
            check = trainer.memoryCheck().orElseThrow();
            assertEquals(inPlace, trainer.info().gatherSchedule().map(s -> s.inPlace()).orElse(false),
                    "whether the ranks gathered in place");
        }
        String what = family + " " + preset + " at N = " + worldSize + (checkpointed ? " with" : " without") + " checkpointing";
        for (long measured : check.measuredPersistentBytesPerRank()) {
            assertEquals(predicted.persistentBytesPerRank(), measured, what + ": persistent bytes");
        }
        long peak = Arrays.stream(check.measuredPeakBytesPerRank()).max().orElseThrow();
        double error = (double) predicted.peakBytesPerRank() / peak - 1;
        assertEquals(predicted.peakBytesPerRank(), check.predictedPeakBytes());
        assertTrue(Math.abs(error) <= 0.10, what + ": predicted peak " + predicted.peakBytesPerRank()
                + " B vs measured " + peak + " B (" + Math.round(1000 * error) / 10.0 + "%)");
    }
}
