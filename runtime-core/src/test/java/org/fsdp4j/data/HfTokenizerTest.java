// HfTokenizer against independent references: GPT-2's byte-level BPE must give the ids OpenAI's
// encoder gives (as the npm package gpt-3-encoder computes them, tools/reference/gpt2_tokenizer.js)
// on a multilingual text, and a Llama-style SentencePiece BPE (byte fallback, ▁ for spaces) the
// ids worked out by hand from its few merges. Both round-trip, and every way a load can fail is
// one line naming the file.
package org.fsdp4j.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalInt;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class HfTokenizerTest {

    @TempDir
    static Path dir;

    static Path gpt2;

    @BeforeAll
    static void unpackGpt2() throws IOException {
        gpt2 = TestTokenizers.gpt2(dir);
    }

    static String text(String name) throws IOException {
        return TestTokenizers.text(name);
    }

    @Test
    void gpt2GivesTheIdsOfOpenAisEncoder() throws IOException {
        Tokenizer t = Tokenizer.load(gpt2);
        String text = text("multilingual.txt");
        int[] expected = Arrays.stream(text("gpt2-ids.txt").strip().split(" ")).mapToInt(Integer::parseInt).toArray();
        assertArrayEquals(expected, t.encode(text));
        assertEquals(text, t.decode(t.encode(text)));
        assertEquals(50257, t.vocabSize());
        assertEquals(OptionalInt.of(50256), t.endOfText());
        assertEquals("tokenizer.json of gpt2 (50257 tokens)", t.describe());
    }

    @Test
    void aFolderHoldingTheFileLoadsTheSame() throws IOException {
        Tokenizer t = Tokenizer.load(gpt2.getParent());
        assertArrayEquals(new int[] {15496, 995}, t.encode("Hello world"));
        assertEquals("<|endoftext|>", t.decode(new int[] {50256}));
    }

    @Test
    void longTextsAreNeitherCutNorPadded() throws IOException {
        Tokenizer t = Tokenizer.load(gpt2);
        String line = text("multilingual.txt");
        int one = t.encode(line).length;
        String many = line.repeat(20);
        int[] ids = t.encode(many);
        assertTrue(ids.length > 19 * one, ids.length + " ids for 20 copies of a text of " + one);
        assertEquals(many, t.decode(ids));
    }

    @ParameterizedTest
    @ValueSource(strings = {"llama-style-tokenizer.json", "metaspace-tokenizer.json"})
    void aSentencePieceBpeMergesSpacesAndFallsBackToBytes(String name) throws IOException {
        Path file = TestTokenizers.copy(name, dir);
        Tokenizer t = Tokenizer.load(file);
        assertEquals(278, t.vocabSize());
        assertEquals(OptionalInt.of(2), t.endOfText());
        // "▁the▁low▁and": every merge applies, one piece per word (▁the 271, ▁low 274, ▁and 277).
        assertArrayEquals(new int[] {271, 274, 277}, t.encode("the low and"));
        // "hello": ▁ h e l l o -> ▁ he l lo; é and 😀 are not pieces, so their UTF-8 bytes (3 + byte).
        assertArrayEquals(new int[] {259, 270, 263, 272}, t.encode("hello"));
        assertArrayEquals(new int[] {271, 259, 3 + 0xC3, 3 + 0xA9, 259, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80},
                t.encode("the é 😀"));
        String text = "the low and the  lowland\n\twhat é 中文 😀 — done";
        assertEquals(text, t.decode(t.encode(text)));
    }

    @Test
    void aMissingFileOrFolderSaysWhatToGive() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Tokenizer.load(dir.resolve("nope.json")));
        assertEquals("tokenizer " + dir.resolve("nope.json") + " does not exist: give a tokenizer.json file or a folder"
                + " holding one (a Hugging Face model's folder)", e.getMessage());
        Path empty = dir.resolve("empty");
        assertTrue(empty.toFile().mkdirs() || Files.isDirectory(empty));
        e = assertThrows(IllegalArgumentException.class, () -> Tokenizer.load(empty));
        assertTrue(e.getMessage().startsWith("tokenizer " + empty.resolve("tokenizer.json") + " does not exist"), e.getMessage());
    }

    @Test
    void aFileThatIsNotATokenizerIsRefusedInOneLine() throws IOException {
        Path notJson = Files.writeString(dir.resolve("vocab.txt"), "hello\nworld\n");
        Path noModel = Files.writeString(dir.resolve("config.json"), "{\"vocab_size\": 50257}");
        Path badModel = Files.writeString(dir.resolve("bad.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0},"
                + " \"merges\": [\"a b c d\"]}}");
        for (Path p : List.of(notJson, noModel, badModel)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Tokenizer.load(p));
            assertTrue(e.getMessage().startsWith("tokenizer " + p + " is not a Hugging Face tokenizer.json ("), e.getMessage());
            assertTrue(e.getMessage().endsWith("): give the tokenizer.json of a model (saved by tokenizers' Tokenizer.save"
                    + " or transformers' save_pretrained)"), e.getMessage());
            assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        }
    }

    @Test
    void idsBeyondTheVocabularyAreRefused() {
        Tokenizer t = Tokenizer.load(gpt2);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> t.decode(new int[] {15496, 50257}));
        assertTrue(e.getMessage().startsWith("token 50257 is beyond the vocabulary of tokenizer " + gpt2 + " (50257 tokens)"),
                e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> t.decode(new int[] {-1}));
    }

    /**
     * A fresh JVM extracts DJL's native library into DJL_CACHE_DIR (not the user's home) and loads
     * the tokenizer from there, the library's path being the only thing it needs: nothing is downloaded.
     */
    @Test
    void theNativeLibraryGoesToDjlCacheDir() throws Exception {
        Path cache = dir.resolve("djl-cache");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = new ArrayList<>(List.of(java, "-DDJL_CACHE_DIR=" + cache, "-cp",
                System.getProperty("java.class.path"), LoadAndEncode.class.getName(), gpt2.toString()));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().remove("DJL_CACHE_DIR");
        pb.environment().remove("ENGINE_CACHE_DIR");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child JVM did not finish");
        assertEquals(0, p.exitValue(), out);
        assertEquals("15496 995", out.strip());     // nothing else on stdout/stderr: DJL logs to SLF4J's no-op provider
        try (Stream<Path> files = Files.walk(cache)) {
            assertTrue(files.anyMatch(f -> f.getFileName().toString().equals(System.mapLibraryName("tokenizers"))),
                    "no " + System.mapLibraryName("tokenizers") + " under " + cache + File.separator);
        }
    }

    /** A cache folder the library cannot be written to is one line naming it and the fix. */
    @Test
    void anUnwritableCacheDirIsOneLineSayingWhatToSet() throws Exception {
        Path notAFolder = Files.writeString(dir.resolve("a-file"), "x").resolve("djl");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(java, "-DDJL_CACHE_DIR=" + notAFolder, "-cp",
                System.getProperty("java.class.path"), LoadAndEncode.class.getName(), gpt2.toString()).redirectErrorStream(true);
        pb.environment().remove("DJL_CACHE_DIR");
        pb.environment().remove("ENGINE_CACHE_DIR");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child JVM did not finish");
        assertEquals(1, p.exitValue(), out);
        assertTrue(out.startsWith("cannot load the tokenizers' native library from DJL's cache " + notAFolder.resolve("tokenizers")
                + " ("), out);
        assertTrue(out.strip().endsWith("): set DJL_CACHE_DIR (the environment, or -DDJL_CACHE_DIR=... in FSDP4J_JAVA_OPTS)"
                + " to a writable folder"), out);
        assertEquals(1, out.strip().lines().count(), out);
    }

    /** The child JVM of the cache tests: prints the ids of "Hello world", or the failure's message. */
    static final class LoadAndEncode {
        public static void main(String[] args) {
            try {
                int[] ids = Tokenizer.load(Path.of(args[0])).encode("Hello world");
                System.out.println(ids[0] + " " + ids[1]);
            } catch (RuntimeException e) {     // the message alone, as the command line prints it
                System.out.println(e.getMessage());
                System.exit(1);
            }
        }
    }
}
