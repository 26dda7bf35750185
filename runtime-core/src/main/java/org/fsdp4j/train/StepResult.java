// What one training step reports: what the step line prints and the summary collects. In a run
// over several processes "over ranks" means over every process's ranks on process 0 when it
// writes metrics.jsonl (--out), else over this process's (JobFigures says why).
package org.fsdp4j.train;

/**
 * @param step            this step, counting from 1
 * @param totalSteps      steps in the run
 * @param loss            mean cross-entropy of the batch, nats
 * @param gradNorm        global gradient norm before clipping
 * @param lr              learning rate used
 * @param timeMs          wall time of the step (forward, backward, optimizer), milliseconds
 * @param tokensPerSecond B·T / step time
 * @param liveBytes       bytes live after the step, the largest over ranks
 * @param peakBytes       peak bytes during the step, the largest over ranks
 * @param peakSplit       that rank's live bytes per category at the instant of its peak (they sum to peakBytes)
 * @param skipped         fp16 loss scaling found inf/NaN gradients: the parameters were not updated
 * @param commBytes       bytes sent during the step, the largest over ranks (0 for one rank)
 * @param hostSyncs       times a rank's host waited for its device during the step, the most over ranks
 * @param promotedCopies  GEMMs of the step whose operand dtypes differed, over all ranks (0 expected)
 * @param valLoss         the validation loss measured after this step (--eval-every); null on the steps without one
 */
public record StepResult(int step, int totalSteps, float loss, double gradNorm, float lr, double timeMs,
                         double tokensPerSecond, long liveBytes, long peakBytes,
                         java.util.Map<org.fsdp4j.api.MemoryCategory, Long> peakSplit, boolean skipped, long commBytes,
                         long hostSyncs, long promotedCopies, Float valLoss) {

    /** Whether a validation loss was measured after this step. */
    public boolean evaluated() {
        return valLoss != null;
    }
}
