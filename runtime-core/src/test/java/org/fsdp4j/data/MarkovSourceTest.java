// The loss floor printed by the trainer is only as good as the entropy-rate computation:
// check it against a closed form and against an empirical estimate on a long trajectory.
package org.fsdp4j.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class MarkovSourceTest {

    private static final long SEED = System.nanoTime();

    private static double binaryEntropy(double p) {
        return -p * Math.log(p) - (1 - p) * Math.log(1 - p);
    }

    @Test
    void twoStateChainMatchesClosedForm() {
        SplittableRandom rng = new SplittableRandom(SEED);
        double p = 0.05 + 0.9 * rng.nextDouble();   // P(0 → 1)
        double q = 0.05 + 0.9 * rng.nextDouble();   // P(1 → 0)
        MarkovSource chain = new MarkovSource(new byte[] {'x', 'y'}, new double[][] {{1 - p, p}, {q, 1 - q}});
        double pi0 = q / (p + q);
        double[] pi = chain.stationary();
        assertEquals(pi0, pi[0], 1e-14, "seed " + SEED);
        assertEquals(1 - pi0, pi[1], 1e-14, "seed " + SEED);
        double expected = pi0 * binaryEntropy(p) + (1 - pi0) * binaryEntropy(q);
        assertEquals(expected, chain.entropyRateNats(), 1e-14, "seed " + SEED);
    }

    /**
     * −(1/N) Σ ln P(x_{n+1} | x_n) over a stationary trajectory is an unbiased estimate of the
     * entropy rate whose standard error is the sample standard deviation / √N (the terms are
     * correlated only through the chain, which mixes within a few steps for these sparse random
     * chains; 6 standard errors leave room for that). The empirical state frequencies must match
     * the stationary distribution the same way.
     */
    private static void checkAgainstTrajectory(MarkovSource chain, long seed) {
        int n = 1 << 21;
        byte[] bytes = chain.generate(n, seed);
        int a = chain.numStates();
        int[] stateOf = new int[256];
        for (int i = 0; i < a; i++) {
            stateOf[chain.symbol(i) & 0xff] = i;
        }
        double sum = 0;
        double sumSq = 0;
        long[] counts = new long[a];
        for (int k = 0; k + 1 < n; k++) {
            int i = stateOf[bytes[k] & 0xff];
            int j = stateOf[bytes[k + 1] & 0xff];
            double p = chain.transition(i, j);
            assertTrue(p > 0, "the trajectory took a transition of probability 0: " + i + " → " + j);
            double nll = -Math.log(p);
            sum += nll;
            sumSq += nll * nll;
            counts[i]++;
        }
        int m = n - 1;
        double mean = sum / m;
        double stdErr = Math.sqrt((sumSq / m - mean * mean) / m);
        assertEquals(chain.entropyRateNats(), mean, 6 * stdErr, "seed " + seed);
        double[] pi = chain.stationary();
        for (int i = 0; i < a; i++) {
            double freq = (double) counts[i] / m;
            double freqStdErr = Math.sqrt(pi[i] * (1 - pi[i]) / m);
            // state visits are positively correlated along a chain: allow 10 binomial standard errors
            assertEquals(pi[i], freq, 10 * freqStdErr + 1e-9, "state " + i + ", seed " + seed);
        }
    }

    @Test
    void standardSourceEntropyRateMatchesLongSample() {
        MarkovSource chain = MarkovSource.standard();
        double h = chain.entropyRateNats();
        assertTrue(h > 0.3 && h < Math.log(24), "entropy rate " + h + " outside (0.3, ln 24)");
        checkAgainstTrajectory(chain, SEED);
    }

    @Test
    void randomChainEntropyRateMatchesLongSample() {
        byte[] alphabet = new byte[40];
        for (int i = 0; i < alphabet.length; i++) {
            alphabet[i] = (byte) (100 + i);
        }
        checkAgainstTrajectory(MarkovSource.random(alphabet, 1, 7, SEED), SEED + 1);
    }

    @Test
    void standardSourceIsFixed() {
        MarkovSource a = MarkovSource.standard();
        MarkovSource b = MarkovSource.standard();
        assertEquals(a.entropyRateNats(), b.entropyRateNats(), 0.0);
        assertEquals(new String(a.generate(1000, 7)), new String(b.generate(1000, 7)));
    }

    @Test
    void rejectsReducibleAndNonStochasticChains() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new MarkovSource(new byte[] {'a', 'b'}, new double[][] {{1, 0}, {0.5, 0.5}}));
        assertTrue(e.getMessage().contains("not irreducible"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> new MarkovSource(new byte[] {'a', 'b'}, new double[][] {{0.7, 0.7}, {0.5, 0.5}}));
        assertTrue(e.getMessage().contains("sums to"), e.getMessage());
    }
}
