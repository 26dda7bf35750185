// Text to token ids and back, whatever the vocabulary: the byte-level one the built-in corpus and
// --data FILE use (every byte its own token, 256 of them), or a Hugging Face tokenizer.json
// (GPT-2's byte-level BPE, a Llama's SentencePiece-style BPE) for real text. Training, the
// tokenize command and generation all see text through this one type.
package org.fsdp4j.data;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.OptionalInt;

public interface Tokenizer {

    /** Token ids of {@code text}, in order, without special tokens added. */
    int[] encode(String text);

    /** The text of {@code ids}; decode(encode(x)) is x for the byte-level and byte-level BPE vocabularies. */
    String decode(int[] ids);

    /** Tokens of the vocabulary: every id is below it. */
    int vocabSize();

    /** What the run header says: "bytes (256 tokens)", "tokenizer.json of gpt2 (50257 tokens)". */
    String describe();

    /**
     * The id that separates documents in a token stream (GPT-2's {@code <|endoftext|>}, a Llama's
     * {@code </s>}), or empty where the vocabulary has none (the byte-level one).
     */
    default OptionalInt endOfText() {
        return OptionalInt.empty();
    }

    /**
     * The Hugging Face tokenizer in {@code fileOrDir}: a tokenizer.json file, or a folder holding one.
     * Read locally, never downloaded; a missing or malformed file is an IllegalArgumentException of
     * one line naming it.
     */
    static Tokenizer load(Path fileOrDir) {
        return HfTokenizer.load(fileOrDir);
    }

    /** The byte-level vocabulary: a token per byte of the UTF-8 text. */
    static Tokenizer bytes() {
        return ByteTokenizer.INSTANCE;
    }

    /** Every byte its own token: the vocabulary of the built-in corpus and of --data FILE without --tokenizer. */
    final class ByteTokenizer implements Tokenizer {

        static final ByteTokenizer INSTANCE = new ByteTokenizer();

        private ByteTokenizer() {
        }

        @Override
        public int[] encode(String text) {
            byte[] b = text.getBytes(StandardCharsets.UTF_8);
            int[] ids = new int[b.length];
            for (int i = 0; i < b.length; i++) {
                ids[i] = b[i] & 0xff;
            }
            return ids;
        }

        @Override
        public String decode(int[] ids) {
            byte[] b = new byte[ids.length];
            for (int i = 0; i < ids.length; i++) {
                if (ids[i] < 0 || ids[i] >= TokenCorpus.BYTE_VOCAB_SIZE) {
                    throw new IllegalArgumentException("token " + ids[i] + " is not a byte (0..255)");
                }
                b[i] = (byte) ids[i];
            }
            return new String(b, StandardCharsets.UTF_8);
        }

        @Override
        public int vocabSize() {
            return TokenCorpus.BYTE_VOCAB_SIZE;
        }

        @Override
        public String describe() {
            return "bytes (" + TokenCorpus.BYTE_VOCAB_SIZE + " tokens)";
        }
    }
}
