// Reads training batches from a token stream in order, as llm.c does: the global batch of a step
// is the next B·T+1 tokens, row b holding tokens [p + bT, p + bT + T] (its last one the target of
// its last position only), and the position then moves on by B·T. Ranks take disjoint row ranges
// of that global batch (the engine slices it), so N ranks over a run see disjoint windows whose
// union is the stream one rank would see, at any N. At the stream's end it starts over (a new
// epoch). The position is a number a checkpoint keeps, so a resumed run continues the stream.
package org.fsdp4j.data;

import org.fsdp4j.api.Batch;
import org.fsdp4j.model.DecoderModel;

public final class StreamSampler {

    private final TokenStream stream;
    private final int batchSize;
    private final int seqLen;
    private final int modelVocab;
    private final int[] window;             // [B*T + 1]: the step's tokens, row b at [b*T, b*T + T]
    private long position;

    /** Batches of {@code batchSize} x {@code seqLen} from {@code stream}, every id checked below {@code modelVocab}. */
    public StreamSampler(TokenStream stream, int batchSize, int seqLen, int modelVocab) {
        long need = (long) batchSize * seqLen + 1;
        if (stream.size() < need) {
            throw new IllegalArgumentException(stream.description() + " has " + stream.size() + " tokens but a batch of "
                    + batchSize + " x " + seqLen + " reads " + need + ": lower --batch-size or --seq-len, or give more data");
        }
        this.stream = stream;
        this.batchSize = batchSize;
        this.seqLen = seqLen;
        this.modelVocab = modelVocab;
        this.window = new int[Math.toIntExact(need)];
    }

    /** The position of the next batch's first token (what a checkpoint keeps). */
    public long position() {
        return position;
    }

    /** Continues from {@code position}, a position() of a run over the same stream. */
    public void seek(long position) {
        if (position < 0 || position >= stream.size()) {
            throw new IllegalArgumentException("the data position " + position + " is beyond the " + stream.size()
                    + " tokens of " + stream.description() + ": resume with the data the checkpoint's run trained on");
        }
        this.position = position;
    }

    /** Moves on by {@code batches} batches without reading them (a checkpoint saved without a position). */
    public void skip(long batches) {
        for (long i = 0; i < batches; i++) {
            position = start(position) + window.length - 1;
        }
    }

    /** Where a batch asked for at {@code p} starts: at p, or back at 0 when fewer than B·T+1 tokens remain. */
    private long start(long p) {
        return p + window.length > stream.size() ? 0 : p;
    }

    /** The next batch: tokens and targets, both (B, T) row-major; targets are the tokens one position on. */
    public Batch next() {
        long p = start(position);
        stream.read(p, window, 0, window.length);
        int[] tokens = new int[batchSize * seqLen];     // (B, T)
        int[] targets = new int[batchSize * seqLen];    // (B, T)
        System.arraycopy(window, 0, tokens, 0, tokens.length);
        System.arraycopy(window, 1, targets, 0, targets.length);
        for (int i = 0; i < window.length; i++) {
            if (window[i] < 0 || window[i] >= modelVocab) {
                throw new IllegalArgumentException("token " + window[i] + " at position " + (p + i) + " of "
                        + stream.description() + " is beyond the model's vocabulary of " + modelVocab + " tokens: give"
                        + " the model the tokenizer's vocabulary (--vocab N, or a --model-config with its vocab_size)");
            }
        }
        position = p + tokens.length;
        return DecoderModel.batch(batchSize, seqLen, tokens, targets);
    }

    public TokenStream stream() {
        return stream;
    }
}
