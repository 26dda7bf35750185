// What the planner predicts for one GPU (rank) of a run: memory by the tracker's categories, the
// bytes it sends per step, compute and communication time, their ratio, whether it fits, what to
// change, the arithmetic step by step (--explain) and the textbook figures beside fsdp4j's own.
// JSON (--json) is this record with snake_case keys.
package org.fsdp4j.plan;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.util.List;

/**
 * @param params             P
 * @param paddedParams       P′: with each unit's alignment and padding to a multiple of the shard group
 * @param memory             bytes per GPU at the step's peak, by category
 * @param hostBytesPerGpu    offloaded state per GPU on the host (0 without offload)
 * @param largestBufferBytes the step's largest single allocation
 * @param comm               bytes one GPU sends per step, by collective and by link
 * @param flopsPerGpu        floating-point work of one step on one GPU (recomputation included)
 * @param computeTimeS       flopsPerGpu at the assumed share of the GPU's peak; absent without a GPU
 * @param commTimeS          intra-node bytes at NVLink speed + inter-node bytes at network speed; absent without a GPU
 * @param commComputeRatio   commTimeS / computeTimeS; absent without a GPU
 * @param fits               the peak fits the GPU's memory less the reserve; absent without a GPU
 * @param recommendations    what to change, in words
 * @param textbook           the usual back-of-envelope figures for this P and N
 * @param explanation        the arithmetic, one line per step
 */
public record Plan(PlanInput input, long params, long paddedParams, Memory memory, long hostBytesPerGpu,
                   long largestBufferBytes, Comm comm, double flopsPerGpu,
                   @JsonInclude(JsonInclude.Include.NON_NULL) Double computeTimeS,
                   @JsonInclude(JsonInclude.Include.NON_NULL) Double commTimeS,
                   @JsonInclude(JsonInclude.Include.NON_NULL) Double commComputeRatio,
                   @JsonInclude(JsonInclude.Include.NON_NULL) Boolean fits,
                   List<String> recommendations, Textbook textbook, List<String> explanation) {

    /**
     * Bytes per GPU by the memory tracker's categories.
     *
     * @param params      fp32 masters, the param-dtype all-gather input, whole parameters where a strategy keeps them
     * @param grads       fp32 gradient shards
     * @param optimizer   AdamW m and v (fp32)
     * @param unitBuffers gathered parameters and unsharded gradients at their peak (the engine's UnitBufferPlan)
     * @param workspace   casts to the reduce dtype, widened half weights, and on a GPU the padded copies of
     *                    half GEMMs off cuBLAS's grid (HalfGemmPadding)
     * @param activations activations at their peak, the batch's tokens included
     */
    public record Memory(long params, long grads, long optimizer, long unitBuffers, long workspace, long activations) {

        /** params + grads + optimizer: what stays between steps. */
        public long persistent() {
            return params + grads + optimizer;
        }

        /** The step's peak: the parts' peaks added (they need not coincide, so this leans high). */
        public long total() {
            return persistent() + unitBuffers + workspace + activations;
        }
    }

    /**
     * Bytes one GPU sends per step (ring algorithms: (n−1)/n of the buffer per all-gather and
     * reduce-scatter over n ranks, 2(n−1)/n per all-reduce).
     *
     * @param allGatherBytes     parameter all-gathers (forward, backward, ZeRO-1's refresh)
     * @param reduceScatterBytes gradient reduce-scatters
     * @param allReduceBytes     gradient all-reduces (DDP, ZeRO-1, hybrid's replicate axis) and the step's metrics
     * @param intraNodeBytes     of all these, over NVLink
     * @param interNodeBytes     of all these, over the network
     */
    public record Comm(long allGatherBytes, long reduceScatterBytes, long allReduceBytes, long intraNodeBytes,
                       long interNodeBytes) {

        public long total() {
            return allGatherBytes + reduceScatterBytes + allReduceBytes;
        }
    }

    /**
     * Model-state bytes per GPU as the ZeRO paper counts them for mixed-precision Adam (2 + 2 + 12
     * = 16 bytes per parameter: fp16 params and grads, fp32 master, m and v), and the common slip.
     *
     * @param ddpBytes          16·P on every GPU
     * @param zero1Bytes        4·P + 12·P/N
     * @param zero2Bytes        2·P + 14·P/N
     * @param zero3Bytes        16·P/N
     * @param slip24Bytes       24·P/N: m and v counted as 8 bytes each, a slip (they are fp32: 4 each)
     * @param fsdp4jBytesPerParam what fsdp4j keeps per parameter under this run's dtypes (its persistent state / P′ · N)
     */
    public record Textbook(long ddpBytes, long zero1Bytes, long zero2Bytes, long zero3Bytes, long slip24Bytes,
                           double fsdp4jBytesPerParam) {
    }
}
