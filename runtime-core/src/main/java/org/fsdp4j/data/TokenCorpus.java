// The bytes a model trains on, read as tokens 0..255 (byte-level vocabulary), plus what is
// known about them: a one-line description for the run header and, for generated data, the
// exact loss floor. The embedded default is generated from MarkovSource.standard(); --data
// reads any file.
package org.fsdp4j.data;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalDouble;

public final class TokenCorpus {

    /** Byte-level vocabulary: every token is one byte value. */
    public static final int BYTE_VOCAB_SIZE = 256;

    /** Length of the embedded default corpus: 1 MiB, far more than a few hundred small steps read. */
    public static final int DEFAULT_NUM_BYTES = 1 << 20;

    /** Seed of the embedded default trajectory (the chain itself has its own fixed seed). */
    public static final long DEFAULT_TRAJECTORY_SEED = 0x0da7_a5eedL;

    private final String description;
    private final byte[] bytes;
    private final OptionalDouble lossFloorNats;

    private TokenCorpus(String description, byte[] bytes, OptionalDouble lossFloorNats) {
        if (bytes.length == 0) {
            throw new IllegalArgumentException(description + " is empty: training needs at least two bytes");
        }
        this.description = description;
        this.bytes = bytes;
        this.lossFloorNats = lossFloorNats;
    }

    /** The embedded default: a 1 MiB trajectory of the fixed Markov source, with its exact loss floor. */
    public static TokenCorpus embeddedDefault() {
        return fromMarkov(MarkovSource.standard(), DEFAULT_NUM_BYTES, DEFAULT_TRAJECTORY_SEED);
    }

    /** A trajectory of {@code numBytes} bytes from {@code source}; the floor is its entropy rate. */
    public static TokenCorpus fromMarkov(MarkovSource source, int numBytes, long seed) {
        String description = String.format("embedded Markov source (%d states, order 1, %d bytes)",
                source.numStates(), numBytes);
        return new TokenCorpus(description, source.generate(numBytes, seed),
                OptionalDouble.of(source.entropyRateNats()));
    }

    /** Every byte of a file (any file; text is the useful case); its loss floor is unknown. */
    public static TokenCorpus fromFile(Path file) {
        checkReadable(file);
        long size;
        byte[] bytes;
        try {
            size = Files.size(file);
            if (size > Integer.MAX_VALUE - 8) {
                throw new IllegalArgumentException("data file " + file + " has " + size
                        + " bytes; files up to 2 GiB are supported: pass a smaller file to --data");
            }
            bytes = Files.readAllBytes(file);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read data file " + file + " (" + e.getMessage()
                    + "): check that it is readable", e);
        }
        if (bytes.length == 0) {
            throw new IllegalArgumentException("data file " + file + " is empty: give --data a file with text in it");
        }
        return new TokenCorpus("file " + file + " (" + bytes.length + " bytes, byte-level)", bytes, OptionalDouble.empty());
    }

    /** Refuses, in one line, a --data path that is not an existing regular file. */
    public static void checkReadable(Path file) {
        if (!Files.exists(file)) {
            throw new IllegalArgumentException("data file " + file + " does not exist: give --data the path of a text file");
        }
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException("data file " + file + " is not a regular file: give --data the path of a text file");
        }
    }

    /** A copy of bytes already in memory (tests, generated data). */
    public static TokenCorpus of(String description, byte[] bytes, OptionalDouble lossFloorNats) {
        return new TokenCorpus(description, bytes.clone(), lossFloorNats);
    }

    /**
     * Tokens [from, to) as a corpus of their own, described as {@code description}, with this
     * one's loss floor (a held-out part of a file: HeldOut).
     */
    public TokenCorpus slice(int from, int to, String description) {
        if (from < 0 || to > bytes.length || from >= to) {
            throw new IllegalArgumentException("slice [" + from + ", " + to + ") of " + bytes.length + " tokens");
        }
        return new TokenCorpus(description, java.util.Arrays.copyOfRange(bytes, from, to), lossFloorNats);
    }

    public String description() {
        return description;
    }

    /** Number of tokens (bytes). */
    public int length() {
        return bytes.length;
    }

    /** Token i as an id in [0, 256). */
    public int token(int i) {
        return bytes[i] & 0xff;
    }

    public int vocabSize() {
        return BYTE_VOCAB_SIZE;
    }

    /** The lowest achievable mean next-token loss in nats, when the source is known. */
    public OptionalDouble lossFloorNats() {
        return lossFloorNats;
    }
}
