// Draws training batches as random windows of a corpus. Batch k depends only on (seed, k), so a
// run is repeatable, a resumed run sees the same data, and N ranks that each slice the same
// global batch agree on it without talking to each other. A batch is the API's Batch, with the
// decoder's "tokens" and "targets" fields, so the trainer hands it to the engine as it is.
package org.fsdp4j.data;

import java.util.SplittableRandom;
import org.fsdp4j.api.Batch;
import org.fsdp4j.model.DecoderModel;

public final class BatchSampler {

    private final TokenCorpus corpus;
    private final int batchSize;
    private final int seqLen;
    private final long seed;

    public BatchSampler(TokenCorpus corpus, int batchSize, int seqLen, long seed) {
        if (batchSize < 1 || seqLen < 1) {
            throw new IllegalArgumentException("batch size and sequence length must be positive, got "
                    + batchSize + " and " + seqLen);
        }
        if (corpus.length() < seqLen + 1) {
            throw new IllegalArgumentException("sequence length " + seqLen + " needs at least " + (seqLen + 1)
                    + " bytes of data, but " + corpus.description() + " is shorter: use --seq-len "
                    + Math.max(1, corpus.length() - 1) + " or less, or a longer file");
        }
        this.corpus = corpus;
        this.batchSize = batchSize;
        this.seqLen = seqLen;
        this.seed = seed;
    }

    /**
     * The batch of step {@code step} (any long; steps count from 1 in the trainer): tokens and
     * targets, both (B, T) row-major, where targets[b, t] is the token after tokens[b, t] in the data.
     */
    public Batch sample(long step) {
        // A fresh generator per step, keyed by (seed, step): SplittableRandom mixes its seed well,
        // and the golden-ratio stride keeps neighbouring (seed, step) pairs apart.
        SplittableRandom rng = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + step);
        int[] tokens = new int[batchSize * seqLen];    // (B, T)
        int[] targets = new int[batchSize * seqLen];   // (B, T)
        int numStarts = corpus.length() - seqLen;      // windows of T+1 bytes
        for (int b = 0; b < batchSize; b++) {
            int start = rng.nextInt(numStarts);
            for (int t = 0; t < seqLen; t++) {
                tokens[b * seqLen + t] = corpus.token(start + t);
                targets[b * seqLen + t] = corpus.token(start + t + 1);
            }
        }
        return DecoderModel.batch(batchSize, seqLen, tokens, targets);
    }

    public TokenCorpus corpus() {
        return corpus;
    }

    public int batchSize() {
        return batchSize;
    }

    public int seqLen() {
        return seqLen;
    }
}
