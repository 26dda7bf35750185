// The loss scaler: halves on overflow, doubles after a run of good steps, and at its floor
// throws the typed exception the trainer turns into a clean divergence. In every precision a
// step whose gradients are not finite is skipped (they never reach the parameters).
package org.fsdp4j.fsdp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.fsdp4j.api.LossScaleFloorException;
import org.junit.jupiter.api.Test;

class LossScalerTest {

    @Test
    void halvesOnOverflowDoublesAfterGoodStepsAndThrowsAtTheFloor() {
        LossScaler s = LossScaler.dynamic(0x1p-22f, 2);
        s.update(true);
        s.update(true);
        assertEquals(0x1p-21f, s.scale(), "doubles after two good steps");
        s.update(false);
        s.update(false);
        s.update(false);
        assertEquals(0x1p-24f, s.scale(), "the floor itself is allowed");
        LossScaleFloorException e = assertThrows(LossScaleFloorException.class, () -> s.update(false));
        assertTrue(LossScaleFloorException.isCauseOf(new RuntimeException("rank 0 failed", e)));
        assertFalse(LossScaleFloorException.isCauseOf(new RuntimeException(new IllegalStateException())));
    }

    @Test
    void nonFiniteGradientsAreSkippedInEveryPrecision() {
        for (LossScaler s : new LossScaler[] {LossScaler.none(), LossScaler.dynamic(65536f, 1000)}) {
            assertTrue(s.skips(false));
            assertFalse(s.skips(true));
        }
        LossScaler none = LossScaler.none();
        none.update(false);
        assertEquals(1f, none.scale(), "without fp16 the scale stays 1");
    }
}
