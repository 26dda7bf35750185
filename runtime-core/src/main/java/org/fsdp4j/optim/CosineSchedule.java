// The learning rate per step: linear warm-up from 0 to maxLr over warmupSteps, then a cosine
// from maxLr down to minLr at totalSteps (held there after), as nanoGPT and llm.c schedule.
package org.fsdp4j.optim;

public record CosineSchedule(float maxLr, float minLr, int warmupSteps, int totalSteps) {

    public CosineSchedule {
        if (!(maxLr >= 0) || !Float.isFinite(maxLr) || !(minLr >= 0) || minLr > maxLr) {
            throw new IllegalArgumentException("cosine schedule needs 0 <= minLr <= maxLr, got minLr=" + minLr
                    + " maxLr=" + maxLr);
        }
        if (warmupSteps < 0 || totalSteps < 1 || warmupSteps > totalSteps) {
            throw new IllegalArgumentException("cosine schedule needs 0 <= warmupSteps <= totalSteps"
                    + " and totalSteps >= 1, got warmupSteps=" + warmupSteps + " totalSteps=" + totalSteps);
        }
    }

    /** The learning rate of step {@code step}, counting from 1 (step warmupSteps reaches maxLr). */
    public float lr(int step) {
        if (step < 1) {
            throw new IllegalArgumentException("steps count from 1, got " + step);
        }
        if (step <= warmupSteps) {
            return (float) ((double) maxLr * step / warmupSteps);
        }
        if (step >= totalSteps) {
            return minLr;
        }
        double progress = (double) (step - warmupSteps) / (totalSteps - warmupSteps);   // (0, 1)
        return (float) (minLr + 0.5 * (1 + Math.cos(Math.PI * progress)) * (maxLr - minLr));
    }
}
