// A finite stream of token ids read by position: the shards of a folder (TokenShards, mapped) or
// a text tokenized in memory (of). What StreamSampler cuts training windows from.
package org.fsdp4j.data;

public interface TokenStream {

    /** Tokens in the stream. */
    long size();

    /** Tokens [from, from + len) into dst[off, off + len). */
    void read(long from, int[] dst, int off, int len);

    /** What the run header says about the data. */
    String description();

    /** The tokens of {@code ids}, described as {@code description}. */
    static TokenStream of(int[] ids, String description) {
        return new TokenStream() {
            @Override
            public long size() {
                return ids.length;
            }

            @Override
            public void read(long from, int[] dst, int off, int len) {
                System.arraycopy(ids, Math.toIntExact(from), dst, off, len);
            }

            @Override
            public String description() {
                return description;
            }
        };
    }
}
