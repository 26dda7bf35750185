// The file source: byte-level tokens, and a clear error for each way a --data file can be wrong.
package org.fsdp4j.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenCorpusTest {

    @TempDir
    Path dir;

    @Test
    void fileBytesAreTokens() throws IOException {
        byte[] bytes = new byte[1000];
        new SplittableRandom(System.nanoTime()).nextBytes(bytes);
        Path file = Files.write(dir.resolve("data.bin"), bytes);
        TokenCorpus corpus = TokenCorpus.fromFile(file);
        assertEquals(1000, corpus.length());
        assertEquals(256, corpus.vocabSize());
        for (int i = 0; i < bytes.length; i++) {
            assertEquals(bytes[i] & 0xff, corpus.token(i));
        }
        assertFalse(corpus.lossFloorNats().isPresent(), "a file has no known loss floor");
    }

    private void assertRejected(Path file, String expected) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TokenCorpus.fromFile(file));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
        assertTrue(e.getMessage().contains("--data"), "the message names the flag to fix: " + e.getMessage());
    }

    @Test
    void missingEmptyAndDirectoryFilesAreRejected() throws IOException {
        assertRejected(dir.resolve("nope.txt"), "does not exist");
        assertRejected(Files.createFile(dir.resolve("empty.txt")), "is empty");
        assertRejected(Files.createDirectory(dir.resolve("sub")), "not a regular file");
    }

    @Test
    void embeddedDefaultCarriesItsFloor() {
        TokenCorpus corpus = TokenCorpus.embeddedDefault();
        assertEquals(TokenCorpus.DEFAULT_NUM_BYTES, corpus.length());
        assertEquals(MarkovSource.standard().entropyRateNats(), corpus.lossFloorNats().orElseThrow(), 0.0);
        for (int i = 0; i < 1000; i++) {
            int token = corpus.token(i);
            assertTrue(token >= 'a' && token <= 'x', "token " + token + " outside the source's alphabet");
        }
    }
}
