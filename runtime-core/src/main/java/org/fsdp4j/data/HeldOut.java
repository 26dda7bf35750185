// The held-out split a run's validation loss is measured on (--eval-every), beside the data it
// trains on, so the two never share a window. The embedded Markov corpus gets a separate
// trajectory of the same chain (another trajectory seed), so its validation loss has the same
// known floor; a --data file holds out its last part, only when a validation loss is asked for
// (the run header says so). of() is the one place a run's data is split: a data source with a
// split of its own (token shards' val_*.bin) adds its case there.
package org.fsdp4j.data;

public record HeldOut(TokenCorpus train, TokenCorpus validation) {

    /** Seed of the embedded default's validation trajectory: not the training one's (TokenCorpus.DEFAULT_TRAJECTORY_SEED). */
    public static final long EMBEDDED_VALIDATION_SEED = 0x0da7_a5ee_d0a1L;

    /** Length of the embedded default's validation trajectory: 64 KiB, far more than a few batches read. */
    public static final int EMBEDDED_VALIDATION_BYTES = 1 << 16;

    /** Percent of a --data file held out, its end (at least one window of T + 1 bytes). */
    public static final int FILE_PERCENT = 5;

    /**
     * The split of a run's data: {@code corpus} is what the run would train on without a
     * validation loss, {@code embedded} whether it is the embedded default (else a --data file),
     * {@code seqLen} the run's T. A file too short to keep a window on each side is an
     * IllegalArgumentException that says what to change.
     */
    public static HeldOut of(TokenCorpus corpus, boolean embedded, int seqLen) {
        return embedded ? embedded(corpus) : lastPartOf(corpus, seqLen);
    }

    /** The embedded default: training as it is, validation on a separate trajectory of the same chain. */
    public static HeldOut embedded(TokenCorpus train) {
        TokenCorpus validation = TokenCorpus.fromMarkov(MarkovSource.standard(), EMBEDDED_VALIDATION_BYTES,
                EMBEDDED_VALIDATION_SEED);
        return new HeldOut(train.slice(0, train.length(), train.description() + "; validation: a separate "
                + EMBEDDED_VALIDATION_BYTES + "-byte trajectory of the same chain"), validation);
    }

    /** A file's bytes: the last FILE_PERCENT% (at least seqLen + 1 bytes) held out, the rest trained on. */
    public static HeldOut lastPartOf(TokenCorpus corpus, int seqLen) {
        int n = corpus.length();
        int window = seqLen + 1;
        int cut = cut(n, window);
        if (cut < 0) {
            throw new IllegalArgumentException(corpus.description() + " is too short to hold out a validation window of "
                    + window + " bytes and train on another: use a longer file, a shorter --seq-len, or no --eval-every");
        }
        int held = n - cut;
        return new HeldOut(corpus.slice(0, cut, corpus.description() + "; its last " + held
                        + " bytes held out for the validation loss"),
                corpus.slice(cut, n, "the last " + held + " bytes of " + corpus.description()));
    }

    /**
     * Where the held-out last FILE_PERCENT% (at least {@code window} tokens) of {@code n} tokens
     * begins, or −1 when the rest would be shorter than a window.
     */
    static int cut(int n, int window) {
        int held = Math.max(window, (int) ((long) n * FILE_PERCENT / 100));
        return n - held < window ? -1 : n - held;
    }
}
