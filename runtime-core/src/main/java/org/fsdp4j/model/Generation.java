// The generation loop on one device: the prompt through the model in one decode call (its prefill),
// then one token at a time, each drawn by a Sampler from the last position's logits and fed back
// through the KV cache, until --max-new-tokens tokens are out or the sequence fills the model's
// context (every token must sit at a position below it). Each token is handed to a listener as it
// is drawn, so text can be printed as it goes.
package org.fsdp4j.model;

import java.util.Arrays;
import java.util.function.IntConsumer;

public final class Generation {

    /** Why generation stopped. */
    public enum Stop {
        /** The requested number of new tokens is out. */
        MAX_NEW_TOKENS,
        /** The sequence fills the model's context: a next token would sit past it. */
        CONTEXT
    }

    /** The generated tokens (the prompt not included) and why it stopped. */
    public record Result(int[] tokens, Stop stop) {
    }

    private Generation() {
    }

    /** As below, drawing among every token of the model's vocabulary. */
    public static Result run(DecoderModel<?> model, int[] prompt, int maxNewTokens, Sampler sampler,
                             IntConsumer onToken) {
        return run(model, prompt, maxNewTokens, sampler, model.vocabSize(), onToken);
    }

    /**
     * Generates up to {@code maxNewTokens} tokens after {@code prompt} (1 to the model's context
     * tokens, each in the vocabulary) with a fresh KV cache of the model's context; the model's
     * parameters must be bound (FullWeights). Tokens are drawn among ids below {@code drawnVocab}
     * (at most the model's vocabulary: a tokenizer's, where the model pads its own past it).
     * {@code onToken} sees each token as it is drawn.
     */
    public static Result run(DecoderModel<?> model, int[] prompt, int maxNewTokens, Sampler sampler, int drawnVocab,
                             IntConsumer onToken) {
        int context = model.maxSeqLen();
        int vocab = model.vocabSize();
        if (drawnVocab < 1 || drawnVocab > vocab) {
            throw new IllegalArgumentException("tokens drawn among " + drawnVocab + " ids, but the model's vocabulary has "
                    + vocab);
        }
        if (prompt.length == 0 || prompt.length > context) {
            throw new IllegalArgumentException("the prompt is " + prompt.length + " tokens; the model takes 1 to "
                    + context + " (its context)");
        }
        if (maxNewTokens < 0) {
            throw new IllegalArgumentException("max new tokens must be 0 or more, got " + maxNewTokens);
        }
        for (int t : prompt) {
            if (t < 0 || t >= vocab) {
                throw new IllegalArgumentException("prompt token " + t + " is outside the model's vocabulary of " + vocab);
            }
        }
        int[] out = new int[Math.min(maxNewTokens, context - prompt.length)];
        int n = 0;
        try (KvCache cache = model.newKvCache(context)) {
            float[] logits = model.decode(cache, prompt);           // (P, V): the last row predicts position P
            int row = (prompt.length - 1) * vocab;
            int pos = prompt.length;                                // the next token's position
            while (true) {
                if (n == maxNewTokens) {
                    return new Result(Arrays.copyOf(out, n), Stop.MAX_NEW_TOKENS);
                }
                if (pos == context) {
                    return new Result(Arrays.copyOf(out, n), Stop.CONTEXT);
                }
                int token = sampler.next(logits, row, drawnVocab);
                out[n++] = token;
                pos++;
                onToken.accept(token);
                if (n < maxNewTokens && pos < context) {           // the last token needs no forward
                    logits = model.decode(cache, new int[] {token});
                    row = 0;
                }
            }
        }
    }
}
