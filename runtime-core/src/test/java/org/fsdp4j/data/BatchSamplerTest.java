// Batches must have the right shapes, be next-token pairs taken from the corpus, and depend
// only on (seed, step).
package org.fsdp4j.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.OptionalDouble;
import java.util.SplittableRandom;
import org.fsdp4j.api.Batch;
import org.fsdp4j.model.DecoderModel;
import org.junit.jupiter.api.Test;

class BatchSamplerTest {

    private static final long SEED = System.nanoTime();

    private static TokenCorpus randomCorpus(int numBytes) {
        byte[] bytes = new byte[numBytes];
        new SplittableRandom(SEED).nextBytes(bytes);
        return TokenCorpus.of("random bytes", bytes, OptionalDouble.empty());
    }

    @Test
    void batchesAreWindowsOfTheCorpus() {
        TokenCorpus corpus = randomCorpus(5000);
        int b = 3;
        int t = 17;
        Batch batch = new BatchSampler(corpus, b, t, SEED).sample(1);
        assertEquals(b, batch.samples());
        assertEquals(t, batch.field(DecoderModel.TOKENS).shape()[1]);
        assertEquals(b * t, batch.field(DecoderModel.TOKENS).ints().length);
        assertEquals(b * t, batch.field(DecoderModel.TARGETS).ints().length);
        for (int row = 0; row < b; row++) {
            int[] tokens = Arrays.copyOfRange(batch.field(DecoderModel.TOKENS).ints(), row * t, (row + 1) * t);
            int[] targets = Arrays.copyOfRange(batch.field(DecoderModel.TARGETS).ints(), row * t, (row + 1) * t);
            assertArrayEquals(Arrays.copyOfRange(tokens, 1, t), Arrays.copyOfRange(targets, 0, t - 1),
                    "targets are the tokens shifted by one");
            int start = findWindow(corpus, tokens, targets[t - 1]);
            assertTrue(start >= 0, "row " + row + " is not a window of the corpus (seed " + SEED + ")");
        }
    }

    private static int findWindow(TokenCorpus corpus, int[] tokens, int last) {
        outer:
        for (int s = 0; s + tokens.length < corpus.length(); s++) {
            for (int i = 0; i < tokens.length; i++) {
                if (corpus.token(s + i) != tokens[i]) {
                    continue outer;
                }
            }
            if (corpus.token(s + tokens.length) == last) {
                return s;
            }
        }
        return -1;
    }

    @Test
    void batchesDependOnlyOnSeedAndStep() {
        TokenCorpus corpus = randomCorpus(100_000);
        BatchSampler a = new BatchSampler(corpus, 4, 32, SEED);
        BatchSampler b = new BatchSampler(corpus, 4, 32, SEED);
        Batch a7 = a.sample(7);
        a.sample(8);
        assertArrayEquals(a7.field(DecoderModel.TOKENS).ints(), b.sample(7).field(DecoderModel.TOKENS).ints());
        assertArrayEquals(a7.field(DecoderModel.TARGETS).ints(), a.sample(7).field(DecoderModel.TARGETS).ints());
        assertFalse(Arrays.equals(a7.field(DecoderModel.TOKENS).ints(), a.sample(8).field(DecoderModel.TOKENS).ints()), "steps 7 and 8 drew the same batch");
        assertFalse(Arrays.equals(a7.field(DecoderModel.TOKENS).ints(), new BatchSampler(corpus, 4, 32, SEED + 1).sample(7).field(DecoderModel.TOKENS).ints()),
                "seeds " + SEED + " and " + (SEED + 1) + " drew the same batch");
    }

    @Test
    void windowsCoverTheWholeCorpus() {
        // The shortest corpus that fits: every start is 0, and the last target is the last byte.
        TokenCorpus corpus = randomCorpus(9);
        Batch batch = new BatchSampler(corpus, 2, 8, SEED).sample(3);
        assertEquals(corpus.token(8), batch.field(DecoderModel.TARGETS).ints()[7]);
        assertEquals(corpus.token(0), batch.field(DecoderModel.TOKENS).ints()[8]);
    }

    @Test
    void sequenceLongerThanTheDataIsRejected() {
        TokenCorpus corpus = randomCorpus(100);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new BatchSampler(corpus, 2, 100, SEED));
        assertTrue(e.getMessage().contains("--seq-len 99 or less"), e.getMessage());
    }
}
