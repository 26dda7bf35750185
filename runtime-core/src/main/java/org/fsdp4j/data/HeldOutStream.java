// The held-out split of a token stream (--eval-every on token shards or on a file tokenized with
// --tokenizer), beside HeldOut's for bytes: a shard folder's val_*.bin, written by data tokenize,
// or a tokenized file's last part, so training and validation never share a window.
package org.fsdp4j.data;

import java.nio.file.Path;

public record HeldOutStream(TokenStream train, TokenStream validation) {

    /** A shard folder's train and val splits; a folder without val shards is a one-line error that says how to make them. */
    public static HeldOutStream ofShards(Path dir) {
        if (!TokenShards.present(dir, "val")) {
            throw new IllegalArgumentException("folder " + dir + " holds no val_*.bin shards for --eval-every: tokenize"
                    + " with fsdp4j data tokenize --val-fraction F (F > 0), or train without --eval-every");
        }
        return new HeldOutStream(TokenShards.open(dir, "train"), TokenShards.open(dir, "val"));
    }

    /**
     * A tokenized file's ids: the last HeldOut.FILE_PERCENT% (at least {@code window} tokens) held
     * out, the rest trained on; too few tokens for a window on each side is a one-line error.
     */
    public static HeldOutStream lastPartOf(int[] ids, String description, int window) {
        int n = ids.length;
        int cut = HeldOut.cut(n, window);
        if (cut < 0) {
            throw new IllegalArgumentException(description + " is too short to hold out a validation window of "
                    + window + " tokens and train on another: use a longer file, a smaller batch or --seq-len, or no"
                    + " --eval-every");
        }
        int held = n - cut;
        return new HeldOutStream(
                TokenStream.of(java.util.Arrays.copyOfRange(ids, 0, cut), description + "; its last " + held
                        + " tokens held out for the validation loss"),
                TokenStream.of(java.util.Arrays.copyOfRange(ids, cut, n), "the last " + held + " tokens of " + description));
    }
}
