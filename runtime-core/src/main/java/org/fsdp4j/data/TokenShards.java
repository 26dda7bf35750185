// The shards of one split in a folder (train_*.bin or val_*.bin, in name order), read as one
// stream of tokens: what training and evaluation read from a folder fsdp4j data tokenize or
// llm.c's preprocessing wrote. Each shard is mapped on its own, so the stream may be any length.
package org.fsdp4j.data;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

public final class TokenShards implements TokenStream {

    private final Path dir;
    private final String split;
    private final List<TokenShard> shards;
    private final long[] starts;            // [shards + 1]: the stream index of each shard's first token, then the total

    private TokenShards(Path dir, String split, List<TokenShard> shards) {
        this.dir = dir;
        this.split = split;
        this.shards = shards;
        this.starts = new long[shards.size() + 1];
        for (int i = 0; i < shards.size(); i++) {
            starts[i + 1] = starts[i] + shards.get(i).size();
        }
    }

    /** Whether {@code dir} holds shards of {@code split} ("train", "val"). */
    public static boolean present(Path dir, String split) {
        return !list(dir, split).isEmpty();
    }

    /** The {@code split} shards of {@code dir}, opened and checked; none is a one-line error. */
    public static TokenShards open(Path dir, String split) {
        List<Path> files = list(dir, split);
        if (files.isEmpty()) {
            throw new IllegalArgumentException("folder " + dir + " holds no " + split + "_*.bin token shards: write them"
                    + " with fsdp4j data tokenize --tokenizer T --out " + dir + " FILES...");
        }
        List<TokenShard> shards = files.stream().map(TokenShard::open).toList();
        for (TokenShard s : shards) {
            if (s.tokenBytes() != shards.get(0).tokenBytes()) {
                throw new IllegalArgumentException("token shard " + s.file() + " has " + s.tokenBytes() + "-byte tokens but "
                        + shards.get(0).file() + " has " + shards.get(0).tokenBytes() + ": a folder holds the shards of one tokenizer");
            }
        }
        return new TokenShards(dir, split, shards);
    }

    private static List<Path> list(Path dir, String split) {
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException("shard folder " + dir + " does not exist: give the --out folder of fsdp4j data tokenize");
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(p -> {
                String n = p.getFileName().toString();
                return n.startsWith(split + "_") && n.endsWith(".bin") && Files.isRegularFile(p);
            }).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir + ": " + e.getMessage(), e);
        }
    }

    public Path dir() {
        return dir;
    }

    public String split() {
        return split;
    }

    /** The shards, in stream order. */
    public List<TokenShard> shards() {
        return shards;
    }

    /** Tokens in all shards together. */
    @Override
    public long size() {
        return starts[shards.size()];
    }

    /** Bytes per token (2: uint16, 4: uint32). */
    public int tokenBytes() {
        return shards.get(0).tokenBytes();
    }

    @Override
    public String description() {
        return "shards " + dir + "/" + split + "_*.bin (" + size() + " tokens in " + shards.size() + " shards, uint"
                + 8 * tokenBytes() + ")";
    }

    /** Tokens [from, from + len) of the stream into dst[off, off + len), across shard ends. */
    @Override
    public void read(long from, int[] dst, int off, int len) {
        if (from < 0 || len < 0 || from + len > size()) {
            throw new IndexOutOfBoundsException("tokens [" + from + ", " + (from + len) + ") of a stream of " + size());
        }
        int s = Arrays.binarySearch(starts, from);
        s = s >= 0 ? s : -s - 2;
        while (len > 0) {
            while (starts[s + 1] <= from) {         // an empty shard, or the end of this one
                s++;
            }
            int n = (int) Math.min(len, starts[s + 1] - from);
            shards.get(s).read(from - starts[s], dst, off, n);
            from += n;
            off += n;
            len -= n;
        }
    }
}
