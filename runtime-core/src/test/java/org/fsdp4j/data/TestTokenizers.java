// The test tokenizers of src/test/resources/tokenizers, unpacked into a test's folder, for the
// tokenizer, shard and command-line tests of every module (through runtime-core's test jar).
package org.fsdp4j.data;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPInputStream;

public final class TestTokenizers {

    private TestTokenizers() {
    }

    /** GPT-2's tokenizer.json (50,257 tokens), unpacked into {@code dir}/gpt2/. */
    public static Path gpt2(Path dir) throws IOException {
        Path folder = dir.resolve("gpt2");
        Files.createDirectories(folder);
        Path file = folder.resolve(HfTokenizer.FILE_NAME);
        if (!Files.exists(file)) {
            try (InputStream in = new GZIPInputStream(resource("gpt2-tokenizer.json.gz"))) {
                Files.copy(in, file);
            }
        }
        return file;
    }

    /** A resource of the tokenizers folder copied to {@code dir}/{@code name}. */
    public static Path copy(String name, Path dir) throws IOException {
        Path file = dir.resolve(name);
        if (!Files.exists(file)) {
            try (InputStream in = resource(name)) {
                Files.copy(in, file);
            }
        }
        return file;
    }

    /** The text of a resource of the tokenizers folder. */
    public static String text(String name) throws IOException {
        try (InputStream in = resource(name)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    private static InputStream resource(String name) {
        InputStream in = TestTokenizers.class.getResourceAsStream("/tokenizers/" + name);
        if (in == null) {
            throw new AssertionError("test resource tokenizers/" + name + " is missing");
        }
        return in;
    }
}
