// The cosine schedule at the points that define it: warm-up start and end, the cosine's middle,
// the end and after it; and its validation.
package org.fsdp4j.optim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class CosineScheduleTest {

    @Test
    void valuesAtWarmupMiddleAndEnd() {
        CosineSchedule s = new CosineSchedule(6e-4f, 6e-5f, 10, 110);
        assertEquals(6e-5f, s.lr(1), 1e-9f);                      // 1/10 of the way up
        assertEquals(3e-4f, s.lr(5), 1e-9f);
        assertEquals(6e-4f, s.lr(10), 1e-9f);                     // top of the warm-up
        assertEquals(3.3e-4f, s.lr(60), 1e-9f);                   // half-way down: (max + min) / 2
        double quarter = 6e-5 + 0.5 * (1 + Math.cos(Math.PI / 4)) * (6e-4 - 6e-5);
        assertEquals(quarter, s.lr(35), 1e-9);
        assertEquals(6e-5f, s.lr(110), 0f);
        assertEquals(6e-5f, s.lr(500), 0f);
        for (int step = 11; step < 110; step++) {
            assertEquals(true, s.lr(step + 1) <= s.lr(step), "non-increasing after warm-up at step " + step);
        }
    }

    @Test
    void invalidSchedulesAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> new CosineSchedule(1e-4f, 1e-3f, 10, 100));
        assertThrows(IllegalArgumentException.class, () -> new CosineSchedule(1e-3f, 0f, 200, 100));
        assertThrows(IllegalArgumentException.class, () -> new CosineSchedule(1e-3f, 0f, 0, 0));
        assertThrows(IllegalArgumentException.class, () -> new CosineSchedule(1e-3f, 0f, 10, 100).lr(0));
    }
}
