// A document's tokens are the end-of-text id then the text's ids, and encoding a long text in
// pieces cut after newlines gives GPT-2's ids of the whole text (what keeps the shards exact); a
// tokenizer that prefixes every text it is given (Llama's ▁) gets the text whole instead.
package org.fsdp4j.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DocumentEncoderTest {

    @TempDir
    Path dir;

    @Test
    void piecesCutAfterNewlinesGiveTheIdsOfTheWholeText() throws IOException {
        Tokenizer t = Tokenizer.load(TestTokenizers.gpt2(dir));
        String text = TestTokenizers.text("multilingual.txt").repeat(8);
        int[] whole = t.encode(text);
        int[] doc = DocumentEncoder.encode(t, text, 200);   // ~25 pieces
        assertEquals(50256, doc[0]);
        assertArrayEquals(whole, Arrays.copyOfRange(doc, 1, doc.length));
    }

    @Test
    void aTokenizerThatPrefixesEveryTextGetsTheTextWhole() throws IOException {
        Tokenizer metaspace = Tokenizer.load(TestTokenizers.copy("llama-style-tokenizer.json", dir));
        assertTrue(!DocumentEncoder.piecesAreExact(metaspace) && DocumentEncoder.piecesAreExact(Tokenizer.bytes()),
                "the probe tells them apart");
        String text = TestTokenizers.text("multilingual.txt").repeat(8);
        int[] doc = DocumentEncoder.encode(metaspace, text);
        int start = metaspace.endOfText().isPresent() ? 1 : 0;
        assertArrayEquals(metaspace.encode(text), Arrays.copyOfRange(doc, start, doc.length));
        int[] pieces = DocumentEncoder.encode(metaspace, text, 200);
        assertTrue(!Arrays.equals(doc, pieces), "in 200-char pieces it would differ: the case the probe exists for");
    }

    @Test
    void aCutNeverSplitsALinesLeadingWhitespaceOrACodePoint() {
        String s = "abc\n   def\nghi";
        assertEquals(11, DocumentEncoder.cut(s, 0, 12));            // after "def\n", before "ghi"
        String emoji = "😀".repeat(10);
        int c = DocumentEncoder.cut(emoji, 0, 7);
        assertTrue(c == 6, "cut at " + c);                          // not between the surrogates of the 4th
    }

    @Test
    void withoutAnEndOfTextTheDocumentIsTheTextsIds() {
        assertArrayEquals(new int[] {'h', 'i'}, DocumentEncoder.encode(Tokenizer.bytes(), "hi"));
    }

    @Test
    void theValidationTailStartsAtALineStart() {
        String text = "line one\nline two\nline three\nline four\n";    // 39 chars
        assertEquals(39, DocumentEncoder.tailStart(text, 0));
        assertEquals(29, DocumentEncoder.tailStart(text, 0.25));     // the cut (29) is where "line four" starts
        assertEquals(4, DocumentEncoder.tailStart("abcdefgh", 0.5));  // one line: cut where it falls
    }
}
