// One global batch of next-token prediction: tokens and targets, both (B, T) row-major, where
// targets[b, t] is the token that follows tokens[b, t] in the data.
package org.fsdp4j.data;

public record Batch(int batchSize, int seqLen, int[] tokens, int[] targets) {

    public Batch {
        long n = (long) batchSize * seqLen;
        if (batchSize < 1 || seqLen < 1 || tokens.length != n || targets.length != n) {
            throw new IllegalArgumentException("a batch of " + batchSize + "×" + seqLen + " needs " + n
                    + " tokens and targets, got " + tokens.length + " and " + targets.length);
        }
    }

    /** Number of token positions, B·T. */
    public int numTokens() {
        return tokens.length;
    }
}
