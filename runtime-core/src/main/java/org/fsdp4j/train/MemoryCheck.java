// The planner's prediction for a run beside what the run measured in its first step, per rank:
// printed after step 1 and kept in summary.json (memory_check), so a person sees at once whether
// the memory model holds for this configuration.
package org.fsdp4j.train;

/**
 * @param predictedPersistentBytes       params + grads + optimizer state one rank keeps, as planned
 * @param predictedPeakBytes             the step's tracked peak on one rank, as planned
 * @param predictedUnitBufferBytes       of which gathered parameters, unsharded gradients and workspace
 * @param predictedActivationBytes       of which activations
 * @param measuredPersistentBytesPerRank params + grads + optimizer live after the first step, per rank
 * @param measuredPeakBytesPerRank       the first step's tracked peak, per rank
 */
public record MemoryCheck(long predictedPersistentBytes, long predictedPeakBytes, long predictedUnitBufferBytes,
                          long predictedActivationBytes, long[] measuredPersistentBytesPerRank,
                          long[] measuredPeakBytesPerRank) {

    /** (predicted − measured) / measured for the largest rank's peak. */
    public double peakError() {
        long max = 0;
        for (long m : measuredPeakBytesPerRank) {
            max = Math.max(max, m);
        }
        return max == 0 ? 0 : (double) predictedPeakBytes / max - 1;
    }

    /** The largest rank's measured persistent bytes. */
    public long measuredPersistentBytes() {
        long max = 0;
        for (long m : measuredPersistentBytesPerRank) {
            max = Math.max(max, m);
        }
        return max;
    }
}
