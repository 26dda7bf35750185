// One block's activations and the head's, in bytes, as a family's model allocates and frees them:
// each family states its own (ModelConfig.activationShape), so the planner (plan.Planner) adds them
// up the same way for every family without knowing any of them.
package org.fsdp4j.model;

/**
 * For b sequences of t tokens: what a block saves for its backward, the most it holds at once in its
 * forward (its saved activations included), its backward's temporaries on top of what it saved, the
 * final norm's output and statistics with the logits and per-token losses, what one pass holds
 * throughout (a Llama's rotary tables), and the largest single buffer.
 *
 * @param x             one (b, T, C) activation
 * @param saved         what a block saves for its backward
 * @param forwardPeak   the most a block holds at once in its forward
 * @param backwardTemps a block's backward temporaries on top of what it saved
 * @param head          the final norm's output and statistics, the logits, the per-token losses
 * @param perPass       what one pass holds throughout
 * @param largest       the largest single buffer
 */
public record ActivationShape(long x, long saved, long forwardPeak, long backwardTemps, long head, long perPass,
                              long largest) {

    /** Bytes of an fp32 value: norm statistics, per-token losses and rotary tables are fp32 whatever the dtype. */
    static final long F32 = 4;
}
