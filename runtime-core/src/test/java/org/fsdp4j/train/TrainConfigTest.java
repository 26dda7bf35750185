// The configuration is where bad input is caught: every rejected value names its flag and the fix.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.function.UnaryOperator;
import org.fsdp4j.model.GptConfig;
import org.junit.jupiter.api.Test;

class TrainConfigTest {

    @Test
    void derivedDefaultsFollowThePresetAndTheSteps() {
        TrainConfig c = TrainConfig.builder().steps(200).fsdp(f -> f.lr(2e-3f)).build();
        assertEquals("tiny", c.preset());
        assertEquals(GptConfig.preset("tiny"), c.model());
        assertEquals(c.model().maxSeqLen(), c.seqLen());
        assertEquals(2e-4f, c.minLr(), 1e-9f);
        assertEquals(10, c.warmupSteps());
        assertEquals(1, TrainConfig.builder().steps(3).build().warmupSteps(), "warm-up is at least one step");
        assertEquals("auto", c.fsdp().device());
        assertTrue(c.dataFile().isEmpty() && c.outDir().isEmpty());
    }

    @Test
    void toBuilderRoundTrips() {
        TrainConfig c = TrainConfig.builder().preset("small").steps(17).fsdp(f -> f.seed(5)).batchSize(3).seqLen(64).fsdp(f -> f.lr(3e-4f))
                .minLr(1e-5f).warmupSteps(4).fsdp(f -> f.weightDecay(0.05f).maxGradNorm(0.5f).activationCheckpointing(true))
                .fsdp(f -> f.device("CPU").cpuThreads(1)).build();
        assertEquals(c, c.toBuilder().build());
        assertEquals("cpu", c.fsdp().device(), "device names are normalised");
    }

    private static void assertRejected(UnaryOperator<TrainConfig.Builder> change, String... expected) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> change.apply(TrainConfig.builder()).build());
        for (String part : expected) {
            assertTrue(e.getMessage().contains(part), "'" + e.getMessage() + "' does not mention '" + part + "'");
        }
    }

    @Test
    void badValuesAreRejectedWithTheFlagToFix() {
        assertRejected(b -> b.preset("huge"), "unknown preset 'huge'", "tiny");
        assertRejected(b -> b.steps(0), "--steps", "at least 1");
        assertRejected(b -> b.steps(-5), "--steps");
        assertRejected(b -> b.batchSize(0), "--batch-size");
        assertRejected(b -> b.seqLen(0), "--seq-len");
        assertRejected(b -> b.seqLen(129), "--seq-len 129", "context of 128", "--seq-len 128 or less");
        assertRejected(b -> b.fsdp(f -> f.lr(0f)), "--lr");
        assertRejected(b -> b.fsdp(f -> f.lr(Float.NaN)), "--lr");
        assertRejected(b -> b.minLr(1f), "--min-lr");
        assertRejected(b -> b.warmupSteps(400), "--warmup-steps");
        assertRejected(b -> b.fsdp(f -> f.weightDecay(-1f)), "--weight-decay");
        assertRejected(b -> b.fsdp(f -> f.maxGradNorm(-1f)), "--max-grad-norm");
        assertRejected(b -> b.fsdp(f -> f.cpuThreads(-1)), "--cpu-threads");
        assertRejected(b -> b.fsdp(f -> f.device("tpu")), "unknown device 'tpu'", "auto, cpu, cuda");
    }
}
