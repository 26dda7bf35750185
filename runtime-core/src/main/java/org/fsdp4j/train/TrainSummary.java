// The record of a run that --out writes as summary.json (keys in snake_case), also when it
// diverged or was interrupted (outcome says which). Arrays named *_per_rank have one entry per
// rank, in rank order, also in a run over several processes (process 0 writes every process's
// ranks), except in the summary of one that failed: then ranks_in_per_rank_arrays names the
// ranks they hold (process 0's). A loss that was not finite is written as null, never as a string.
package org.fsdp4j.train;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonUnwrapped;
import java.util.Map;

/**
 * @param model                   model family (gpt, llama)
 * @param preset                  model preset name, within the family
 * @param params                  model parameters
 * @param worldSize               ranks
 * @param device                  resolved device
 * @param backend                 backend in words
 * @param data                    data source in words
 * @param steps                   steps run (see outcome for the steps planned)
 * @param batchSize               B
 * @param seqLen                  T
 * @param seed                    the run's seed
 * @param lossFloor               the data's entropy rate in nats, absent when unknown
 * @param losses                  the loss of every step (NaN, written as null, where it was not finite)
 * @param finalLoss               the loss of the last step (NaN when no step ran)
 * @param tailLossMean            mean loss of the last {@link Trainer#TAIL_STEPS} steps (less noisy than one batch)
 * @param stepTimeMsMedian        median step time (NaN when no step ran)
 * @param tokensPerSecond         B·T / median step time
 * @param totalTimeS              wall time of all steps
 * @param persistentBytesPerRank  params + grads + optimizer bytes live after the last step
 * @param peakBytesPerRank        the highest live bytes over the run
 * @param peakBytesByCategory     per memory category (params, grads, ...), the highest live bytes per rank
 * @param bytesAtPeakByCategory   per memory category, what was live at the instant of each rank's highest peak (sums to it)
 * @param strategy                sharding strategy (full_shard, ...)
 * @param paramDtype              dtype parameters were gathered and computed in
 * @param reduceDtype             dtype gradients were reduced in
 * @param microBatches            forward/backward passes per step
 * @param paddedParams            parameters plus alignment and shard padding (P′)
 * @param commBytesPerRank        bytes each rank sent in one step (the last; received is equal), ring convention
 * @param unitBufferSchedule      the engine's backward schedule (root_grad_kept, root_grad_split); absent where
 *                                the run does not report its sharding (TrainConfig.reportsSharding)
 * @param unitBufferBudgetBytes   (1 + prefetch) largest gathered units + one unit's gradient: the memory model's bound; absent as the schedule is
 * @param hostPersistentBytesPerRank offloaded state (master, gradient shard, optimizer) per rank; absent without --offload
 * @param hostPeakBytesPerRank    the highest host bytes per rank; absent without --offload
 * @param hostSyncsPerStep        the most times any rank's host waited for its device in one step (the budget is 1:
 *                                the read of the loss and the gradient norm)
 * @param promotedCopies          GEMMs whose operand dtypes differed, each a promoting copy on CUDA, over the run (0
 *                                when compute runs in the parameter dtype)
 * @param debugStreams            the run used the debug streams (slow: random delays, poisoned memory)
 * @param outcome                 planned and skipped steps, and whether the run diverged or was interrupted (top-level keys)
 * @param resumedFrom             the checkpoint the run started from (its losses are included above); absent for a fresh run
 * @param checkpoints             the checkpoints written (step, dir, blocked_ms, write_ms, bytes, files); absent without --save-dir
 * @param memoryCheck             the planner's prediction beside the first step's measured memory per rank
 * @param ranksInPerRankArrays    the global ranks the per-rank arrays (memory_check's too) hold, in order; absent
 *                                when they hold every rank 0..N−1, which is always but in a run over several
 *                                processes that failed before its end: then they hold only process 0's ranks
 * @param valLosses               every validation loss this process measured (--eval-every), by step; absent without
 *                                --eval-every (a resumed run has those since it resumed)
 * @param finalValLoss            the last of them; absent where none was measured
 */
public record TrainSummary(String model, String preset, long params, int worldSize, String device, String backend, String data,
                           int steps, int batchSize, int seqLen, long seed,
                           @JsonInclude(JsonInclude.Include.NON_NULL) Double lossFloor,
                           float[] losses, float finalLoss, double tailLossMean, double stepTimeMsMedian,
                           double tokensPerSecond, double totalTimeS, long[] persistentBytesPerRank,
                           long[] peakBytesPerRank, Map<String, long[]> peakBytesByCategory,
                           Map<String, long[]> bytesAtPeakByCategory,
                           String strategy, String paramDtype, String reduceDtype, int microBatches, long paddedParams,
                           long[] commBytesPerRank,
                           @JsonInclude(JsonInclude.Include.NON_NULL) String unitBufferSchedule,
                           @JsonInclude(JsonInclude.Include.NON_NULL) Long unitBufferBudgetBytes,
                           @JsonInclude(JsonInclude.Include.NON_NULL) long[] hostPersistentBytesPerRank,
                           @JsonInclude(JsonInclude.Include.NON_NULL) long[] hostPeakBytesPerRank,
                           long hostSyncsPerStep, long promotedCopies, boolean debugStreams,
                           @JsonUnwrapped RunOutcome outcome,
                           @JsonInclude(JsonInclude.Include.NON_NULL) Trainer.ResumedFrom resumedFrom,
                           @JsonInclude(JsonInclude.Include.NON_NULL) java.util.List<org.fsdp4j.checkpoint.Checkpointer.Save> checkpoints,
                           @JsonInclude(JsonInclude.Include.NON_NULL) MemoryCheck memoryCheck,
                           @JsonInclude(JsonInclude.Include.NON_NULL) int[] ranksInPerRankArrays,
                           @JsonInclude(JsonInclude.Include.NON_NULL) java.util.List<ValLoss> valLosses,
                           @JsonInclude(JsonInclude.Include.NON_NULL) Float finalValLoss) {

    /**
     * One validation loss.
     *
     * @param step    the step after which it was measured
     * @param valLoss the mean loss over the held-out batches, nats
     */
    public record ValLoss(int step, float valLoss) {
    }
}
