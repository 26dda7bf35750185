// Turns one text document into the tokens a shard or a training stream holds: the tokenizer's
// end-of-text id first (llm.c's convention: every document, the first included, starts with it),
// then the text's ids. A long text is encoded in pieces of about a MiB, cut after a newline that
// a non-space character follows: GPT-2's and Llama 3's pre-tokenizers never join tokens across
// such a point, so the ids are those of the whole text, while the tokenizer's memory stays small.
// A tokenizer for which that does not hold (a SentencePiece-style one prepends ▁ to every text it
// is given, so to every piece) is found by a probe and given the text whole.
package org.fsdp4j.data;

import java.util.Arrays;

public final class DocumentEncoder {

    /** Characters per piece a long text is encoded in. */
    static final int PIECE_CHARS = 1 << 20;

    private DocumentEncoder() {
    }

    /** The tokens of {@code text} as one document: end-of-text (where the tokenizer has one), then its ids. */
    public static int[] encode(Tokenizer tokenizer, CharSequence text) {
        return encode(tokenizer, text, piecesAreExact(tokenizer) ? PIECE_CHARS : Integer.MAX_VALUE);
    }

    /** Whether encoding a text in pieces cut as cut() cuts gives {@code tokenizer}'s ids of the whole text. */
    static boolean piecesAreExact(Tokenizer tokenizer) {
        String first = "Pieces of a text, one\n";
        String second = "after another.\n";
        int[] a = tokenizer.encode(first);
        int[] b = tokenizer.encode(second);
        int[] joined = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, joined, a.length, b.length);
        return Arrays.equals(tokenizer.encode(first + second), joined);
    }

    static int[] encode(Tokenizer tokenizer, CharSequence text, int pieceChars) {
        int[] out = new int[Math.max(16, text.length() / 3)];
        int n = 0;
        if (tokenizer.endOfText().isPresent()) {
            out[n++] = tokenizer.endOfText().getAsInt();
        }
        for (int from = 0; from < text.length(); ) {
            int to = cut(text, from, pieceChars);
            int[] ids = tokenizer.encode(text.subSequence(from, to).toString());
            if (n + ids.length > out.length) {
                out = Arrays.copyOf(out, Math.max(n + ids.length, out.length + out.length / 2));
            }
            System.arraycopy(ids, 0, out, n, ids.length);
            n += ids.length;
            from = to;
        }
        return Arrays.copyOf(out, n);
    }

    /** Where the piece starting at {@code from} ends: the text's end, a newline's end, or (no newline) the limit. */
    static int cut(CharSequence text, int from, int pieceChars) {
        if (text.length() - from <= pieceChars) {
            return text.length();
        }
        int limit = from + pieceChars;
        int anyNewline = -1;
        for (int i = limit - 1; i > from + pieceChars / 2; i--) {
            if (text.charAt(i - 1) == '\n') {
                if (!Character.isWhitespace(text.charAt(i))) {
                    return i;
                }
                anyNewline = anyNewline < 0 ? i : anyNewline;
            }
        }
        if (anyNewline > 0) {
            return anyNewline;
        }
        return Character.isHighSurrogate(text.charAt(limit - 1)) ? limit - 1 : limit;   // never inside a code point
    }

    /**
     * Where {@code text}'s last {@code fraction} begins: the start of the line the cut falls in, so
     * the validation part is whole lines (mid-line for a text of one line). 0 gives the end.
     */
    public static int tailStart(CharSequence text, double fraction) {
        if (fraction <= 0) {
            return text.length();
        }
        int at = (int) Math.min(text.length(), Math.round(text.length() * (1 - fraction)));
        for (int i = at; i > 0; i--) {
            if (text.charAt(i - 1) == '\n') {
                return i;
            }
        }
        return at;
    }
}
