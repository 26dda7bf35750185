// How the next token is drawn from a model's logits when generating text: greedy (the most likely
// token, the lowest id among equals) at temperature 0, otherwise a draw from softmax(logits / T)
// over the k most likely tokens (all when k = 0), from a SplittableRandom seeded once, so that the
// same seed, model and prompt give the same tokens on every run and machine. The arithmetic is
// fp64 over the host's fp32 logits and the candidates are walked in one fixed order (descending
// logit, then id), so the draw depends on nothing but the seed and the logits.
package org.fsdp4j.model;

import java.util.Arrays;
import java.util.SplittableRandom;

public final class Sampler {

    private final double temperature;
    private final int topK;
    private final SplittableRandom random;

    /**
     * @param temperature 0 for greedy decoding, else the softmax's temperature (&gt; 0, finite)
     * @param topK        draw among the k most likely tokens; 0 for every token
     * @param seed        the draws' seed (unused when greedy)
     * @throws IllegalArgumentException if temperature is negative or not finite, or topK is negative
     */
    public Sampler(double temperature, int topK, long seed) {
        if (!(temperature >= 0) || Double.isInfinite(temperature)) {
            throw new IllegalArgumentException("--temperature must be 0 (greedy) or a positive number, got " + temperature);
        }
        if (topK < 0) {
            throw new IllegalArgumentException("--top-k must be 0 (every token) or a positive number of tokens, got "
                    + topK);
        }
        this.temperature = temperature;
        this.topK = topK;
        this.random = new SplittableRandom(seed);
    }

    /** Whether every token is the most likely one (temperature 0). */
    public boolean greedy() {
        return temperature == 0;
    }

    /** The next token from {@code logits[offset .. offset + vocab)}. */
    public int next(float[] logits, int offset, int vocab) {
        if (greedy() || topK == 1) {
            return argmax(logits, offset, vocab);
        }
        Integer[] order = new Integer[vocab];       // candidate ids, most likely first, ties by id
        for (int i = 0; i < vocab; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> {
            int c = Float.compare(logits[offset + b], logits[offset + a]);
            return c != 0 ? c : Integer.compare(a, b);
        });
        int n = topK == 0 ? vocab : Math.min(topK, vocab);
        double max = logits[offset + order[0]];
        double[] weight = new double[n];
        double sum = 0;
        for (int i = 0; i < n; i++) {
            weight[i] = Math.exp((logits[offset + order[i]] - max) / temperature);
            sum += weight[i];
        }
        double u = random.nextDouble() * sum;
        for (int i = 0; i < n; i++) {
            u -= weight[i];
            if (u < 0) {
                return order[i];
            }
        }
        return order[n - 1];                         // u landed on the sum's last rounding
    }

    /** The id of the largest logit, the lowest among equals. */
    public static int argmax(float[] logits, int offset, int vocab) {
        int best = 0;
        for (int i = 1; i < vocab; i++) {
            if (logits[offset + i] > logits[offset + best]) {
                best = i;
            }
        }
        return best;
    }
}
