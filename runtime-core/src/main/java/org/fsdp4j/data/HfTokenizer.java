// A Hugging Face tokenizer.json (GPT-2's byte-level BPE, a Llama's SentencePiece-style BPE, any
// model the tokenizers library reads) as a Tokenizer, run by the Rust library through DJL's JNI
// binding. Only a local file is read: DJL extracts its native library from its own jar into a
// cache folder (DJL_CACHE_DIR, as an environment variable or a system property; ~/.djl.ai when
// unset) and never downloads anything on this path. The vocabulary size and the end-of-text id,
// which DJL does not expose, are read from the JSON itself.
package org.fsdp4j.data;

import ai.djl.engine.EngineException;
import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.util.Utils;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;

public final class HfTokenizer implements Tokenizer {

    /** The file a model's folder holds its tokenizer in. */
    public static final String FILE_NAME = "tokenizer.json";

    /** Special tokens that end a document, most specific first (GPT-2, Llama 3, Llama 2 / SentencePiece, Gemma). */
    private static final List<String> END_OF_TEXT = List.of("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>");

    private final Path file;
    private final HuggingFaceTokenizer tokenizer;
    private final int vocabSize;
    private final OptionalInt endOfText;
    private final String name;

    private HfTokenizer(Path file, HuggingFaceTokenizer tokenizer, int vocabSize, OptionalInt endOfText, String name) {
        this.file = file;
        this.tokenizer = tokenizer;
        this.vocabSize = vocabSize;
        this.endOfText = endOfText;
        this.name = name;
    }

    /**
     * The tokenizer in {@code fileOrDir}: a tokenizer.json, or a folder holding one. Every failure
     * is an IllegalArgumentException of one line naming the file and what to give instead.
     */
    public static HfTokenizer load(Path fileOrDir) {
        Path file = Files.isDirectory(fileOrDir) ? fileOrDir.resolve(FILE_NAME) : fileOrDir;
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException("tokenizer " + file + " does not exist: give a " + FILE_NAME
                    + " file or a folder holding one (a Hugging Face model's folder)");
        }
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(file.toFile());
        } catch (JsonProcessingException e) {
            throw notATokenizer(file, "not JSON: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read tokenizer " + file + ": " + e.getMessage(), e);
        }
        JsonNode model = root == null ? null : root.get("model");
        if (model == null || !model.isObject()) {
            throw notATokenizer(file, "no \"model\" object");
        }
        int size = 0;
        JsonNode vocab = model.get("vocab");
        if (vocab != null && vocab.isObject()) {                 // BPE, WordPiece, WordLevel: token -> id
            for (Iterator<JsonNode> it = vocab.elements(); it.hasNext(); ) {
                size = Math.max(size, it.next().asInt() + 1);
            }
        } else if (vocab != null && vocab.isArray()) {            // Unigram: [piece, score] at index id
            size = vocab.size();
        }
        OptionalInt eot = OptionalInt.empty();
        int eotRank = END_OF_TEXT.size();
        JsonNode added = root.get("added_tokens");
        if (added != null && added.isArray()) {
            for (JsonNode t : added) {
                int id = t.path("id").asInt(-1);
                size = Math.max(size, id + 1);
                int rank = END_OF_TEXT.indexOf(t.path("content").asText());
                if (rank >= 0 && rank < eotRank && t.path("special").asBoolean(true)) {
                    eot = OptionalInt.of(id);
                    eotRank = rank;
                }
            }
        }
        if (size == 0) {
            throw notATokenizer(file, "its model has no vocabulary");
        }
        HuggingFaceTokenizer hf;
        try {
            // Nothing added around the text (no BOS/EOS), nothing cut or padded: the ids are the text's.
            hf = HuggingFaceTokenizer.newInstance(file, Map.of("addSpecialTokens", "false",
                    "truncation", "false", "padding", "false"));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read tokenizer " + file + ": " + e.getMessage(), e);
        } catch (EngineException e) {       // the native library could not be extracted or loaded
            Throwable cause = e;
            while (cause.getCause() != null && cause.getCause() != cause) {
                cause = cause.getCause();
            }
            throw new UncheckedIOException("cannot load the tokenizers' native library from DJL's cache "
                    + Utils.getEngineCacheDir("tokenizers") + " (" + cause + "): set DJL_CACHE_DIR (the environment, or"
                    + " -DDJL_CACHE_DIR=... in FSDP4J_JAVA_OPTS) to a writable folder", new IOException(e));
        } catch (RuntimeException e) {      // the Rust library's parse error (a plain RuntimeException from JNI)
            throw notATokenizer(file, String.valueOf(e.getMessage()).lines().findFirst().orElse(""));
        }
        Path parent = file.toAbsolutePath().getParent();
        String name = file.getFileName().toString().equals(FILE_NAME) && parent != null && parent.getFileName() != null
                ? parent.getFileName().toString() : file.getFileName().toString();
        return new HfTokenizer(file, hf, size, eot, name);
    }

    private static IllegalArgumentException notATokenizer(Path file, String why) {
        return new IllegalArgumentException("tokenizer " + file + " is not a Hugging Face " + FILE_NAME + " (" + why
                + "): give the " + FILE_NAME + " of a model (saved by tokenizers' Tokenizer.save or transformers' save_pretrained)");
    }

    @Override
    public int[] encode(String text) {
        Encoding e = tokenizer.encode(text, false, false);
        long[] ids = e.getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
            out[i] = Math.toIntExact(ids[i]);
        }
        return out;
    }

    @Override
    public String decode(int[] ids) {
        long[] l = new long[ids.length];
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] < 0 || ids[i] >= vocabSize) {
                throw new IllegalArgumentException("token " + ids[i] + " is beyond the vocabulary of tokenizer " + file
                        + " (" + vocabSize + " tokens): the ids come from another tokenizer or a model with a larger"
                        + " vocabulary; decode them with the tokenizer they were made with");
            }
            l[i] = ids[i];
        }
        return tokenizer.decode(l, false);      // special tokens kept: decode(encode(x)) is x, an EOT shows as itself
    }

    @Override
    public int vocabSize() {
        return vocabSize;
    }

    @Override
    public OptionalInt endOfText() {
        return endOfText;
    }

    @Override
    public String describe() {
        return FILE_NAME + " of " + name + " (" + vocabSize + " tokens)";
    }

    /** The file this tokenizer was read from. */
    public Path file() {
        return file;
    }
}
