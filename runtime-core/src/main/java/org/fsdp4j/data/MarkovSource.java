// A stationary order-1 Markov chain over a small alphabet of byte values. It is the embedded
// default training data: its entropy rate is known exactly, so a trainer can print the loss
// floor (the best mean cross-entropy any next-byte predictor can reach) and show how close
// the model gets. Each next byte depends only on the current one, which every position
// of a training window sees, so the floor holds at every position.
package org.fsdp4j.data;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

public final class MarkovSource {

    /** Seed of the embedded default chain: fixed, so every build trains on the same source. */
    public static final long DEFAULT_CHAIN_SEED = 0x5eed_f5d4_0001L;

    private final byte[] alphabet;          // (A) the byte value emitted in each state
    private final double[][] transition;    // (A, A) row-stochastic: transition[i][j] = P(j | i)
    private final double[] stationary;      // (A) the unique π with π·P = π, Σπ = 1
    private final double entropyRateNats;   // Σ_i π_i · H(P[i, ·])
    private final int[][] successors;       // (A, k_i) states reachable in one step, for sampling
    private final double[][] cumulative;    // (A, k_i) cumulative probabilities over successors

    /**
     * A chain with the given emitted bytes and transition matrix. The rows must be probability
     * distributions and the chain irreducible (every state reachable from every other), so the
     * stationary distribution and the entropy rate are unique.
     */
    public MarkovSource(byte[] alphabet, double[][] transition) {
        int a = alphabet.length;
        if (a < 2 || transition.length != a) {
            throw new IllegalArgumentException("a Markov source needs at least 2 states and an A×A transition matrix; got "
                    + a + " states and " + transition.length + " rows");
        }
        this.alphabet = alphabet.clone();
        this.transition = new double[a][];
        for (int i = 0; i < a; i++) {
            double[] row = transition[i];
            if (row.length != a) {
                throw new IllegalArgumentException("transition row " + i + " has " + row.length + " entries, expected " + a);
            }
            double total = 0;
            for (double p : row) {
                if (!(p >= 0)) {
                    throw new IllegalArgumentException("transition row " + i + " has a negative or NaN entry");
                }
                total += p;
            }
            if (Math.abs(total - 1) > 1e-12) {
                throw new IllegalArgumentException("transition row " + i + " sums to " + total + ", not 1");
            }
            this.transition[i] = row.clone();
        }
        requireIrreducible(this.transition);
        this.stationary = stationaryDistribution(this.transition);
        this.entropyRateNats = entropyRate(this.transition, stationary);
        this.successors = new int[a][];
        this.cumulative = new double[a][];
        for (int i = 0; i < a; i++) {
            List<Integer> next = new ArrayList<>();
            for (int j = 0; j < a; j++) {
                if (this.transition[i][j] > 0) {
                    next.add(j);
                }
            }
            successors[i] = next.stream().mapToInt(Integer::intValue).toArray();
            cumulative[i] = new double[next.size()];
            double c = 0;
            for (int s = 0; s < next.size(); s++) {
                c += this.transition[i][next.get(s)];
                cumulative[i][s] = c;
            }
        }
    }

    /**
     * The embedded default: 24 states emitting 'a'..'x', each with 2 to 5 successors (always
     * including the next letter, which makes the chain irreducible) with exponentially
     * distributed weights. Entropy rate ≈ 1 nat per byte, against ln 256 ≈ 5.55 for a model that
     * knows nothing, and a table small enough for the tiny preset to learn in a few hundred steps.
     */
    public static MarkovSource standard() {
        byte[] letters = new byte[24];
        for (int i = 0; i < letters.length; i++) {
            letters[i] = (byte) ('a' + i);
        }
        return random(letters, 2, 5, DEFAULT_CHAIN_SEED);
    }

    /**
     * A random sparse chain: each state gets between minSuccessors and maxSuccessors successors,
     * one of them the next state in the alphabet (so the chain is irreducible), weighted by
     * exponential draws, all from {@code seed}.
     */
    public static MarkovSource random(byte[] alphabet, int minSuccessors, int maxSuccessors, long seed) {
        int a = alphabet.length;
        if (minSuccessors < 1 || maxSuccessors < minSuccessors || maxSuccessors > a) {
            throw new IllegalArgumentException("successors per state must satisfy 1 <= min <= max <= " + a
                    + "; got min " + minSuccessors + ", max " + maxSuccessors);
        }
        SplittableRandom rng = new SplittableRandom(seed);
        double[][] p = new double[a][a];
        for (int i = 0; i < a; i++) {
            int k = rng.nextInt(minSuccessors, maxSuccessors + 1);
            boolean[] chosen = new boolean[a];
            chosen[(i + 1) % a] = true;
            int count = 1;
            while (count < k) {
                int j = rng.nextInt(a);
                if (!chosen[j]) {
                    chosen[j] = true;
                    count++;
                }
            }
            double total = 0;
            for (int j = 0; j < a; j++) {
                if (chosen[j]) {
                    p[i][j] = -Math.log(1 - rng.nextDouble());   // Exp(1): a Dirichlet(1, ..., 1) row once normalised
                    total += p[i][j];
                }
            }
            for (int j = 0; j < a; j++) {
                p[i][j] /= total;
            }
        }
        return new MarkovSource(alphabet, p);
    }

    public int numStates() {
        return alphabet.length;
    }

    /** Entropy rate of the chain in nats per byte: the loss floor of next-byte prediction. */
    public double entropyRateNats() {
        return entropyRateNats;
    }

    public double[] stationary() {
        return stationary.clone();
    }

    /** P(next state j | state i). */
    public double transition(int i, int j) {
        return transition[i][j];
    }

    /** The byte emitted in state i. */
    public byte symbol(int i) {
        return alphabet[i];
    }

    /**
     * {@code numBytes} bytes of one trajectory: the first state is drawn from the stationary
     * distribution, so every position is distributed as the chain in equilibrium.
     */
    public byte[] generate(int numBytes, long seed) {
        if (numBytes < 1) {
            throw new IllegalArgumentException("generate at least one byte, got " + numBytes);
        }
        SplittableRandom rng = new SplittableRandom(seed);
        byte[] out = new byte[numBytes];
        int state = draw(rng.nextDouble(), stationaryCumulative());
        for (int n = 0; n < numBytes; n++) {
            out[n] = alphabet[state];
            int s = draw(rng.nextDouble(), cumulative[state]);
            state = successors[state][s];
        }
        return out;
    }

    private double[] stationaryCumulative() {
        double[] c = new double[stationary.length];
        double sum = 0;
        for (int i = 0; i < c.length; i++) {
            sum += stationary[i];
            c[i] = sum;
        }
        return c;
    }

    /** The first index whose cumulative probability exceeds u·total (robust to a last entry of 1 − ε). */
    private static int draw(double u, double[] cumulative) {
        double target = u * cumulative[cumulative.length - 1];
        int lo = 0;
        int hi = cumulative.length - 1;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (cumulative[mid] > target) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo;
    }

    private static void requireIrreducible(double[][] p) {
        int a = p.length;
        if (!reachesAll(p, false) || !reachesAll(p, true)) {
            throw new IllegalArgumentException("the Markov chain is not irreducible (some of its " + a
                    + " states cannot reach the others), so its stationary distribution is not unique");
        }
    }

    /** Whether state 0 reaches every state (reverse: whether every state reaches state 0). */
    private static boolean reachesAll(double[][] p, boolean reverse) {
        int a = p.length;
        boolean[] seen = new boolean[a];
        int[] stack = new int[a];
        int top = 0;
        stack[top++] = 0;
        seen[0] = true;
        int count = 1;
        while (top > 0) {
            int i = stack[--top];
            for (int j = 0; j < a; j++) {
                double edge = reverse ? p[j][i] : p[i][j];
                if (edge > 0 && !seen[j]) {
                    seen[j] = true;
                    count++;
                    stack[top++] = j;
                }
            }
        }
        return count == a;
    }

    /**
     * Solves π·(P − I) = 0 with Σπ = 1 (the last balance equation replaced by the normalisation)
     * by Gaussian elimination with partial pivoting, in double precision.
     */
    static double[] stationaryDistribution(double[][] p) {
        int a = p.length;
        double[][] m = new double[a][a + 1];   // (A, A+1) augmented system, row r = equation r
        for (int r = 0; r < a - 1; r++) {
            for (int c = 0; c < a; c++) {
                m[r][c] = p[c][r] - (r == c ? 1 : 0);   // Σ_c π_c P[c][r] − π_r = 0
            }
        }
        for (int c = 0; c < a; c++) {
            m[a - 1][c] = 1;
        }
        m[a - 1][a] = 1;
        for (int col = 0; col < a; col++) {
            int pivot = col;
            for (int r = col + 1; r < a; r++) {
                if (Math.abs(m[r][col]) > Math.abs(m[pivot][col])) {
                    pivot = r;
                }
            }
            double[] tmp = m[col];
            m[col] = m[pivot];
            m[pivot] = tmp;
            for (int r = 0; r < a; r++) {
                if (r != col && m[r][col] != 0) {
                    double f = m[r][col] / m[col][col];
                    for (int c = col; c <= a; c++) {
                        m[r][c] -= f * m[col][c];
                    }
                }
            }
        }
        double[] pi = new double[a];
        for (int i = 0; i < a; i++) {
            pi[i] = m[i][a] / m[i][i];
        }
        return pi;
    }

    /** H = Σ_i π_i · Σ_j −P_ij ln P_ij, in nats. */
    static double entropyRate(double[][] p, double[] pi) {
        double h = 0;
        for (int i = 0; i < p.length; i++) {
            double rowEntropy = 0;
            for (double q : p[i]) {
                if (q > 0) {
                    rowEntropy -= q * Math.log(q);
                }
            }
            h += pi[i] * rowEntropy;
        }
        return h;
    }
}
