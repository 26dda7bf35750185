// Decoding with a KV cache (DecoderModel.decode) gives, at every position, the logits the full
// forward gives over the same sequence, for both families and a grouped-query Llama, whether the
// sequence is run token by token, as a prefill then token by token, or in one call; and a cache
// that would pass its capacity or the model's context is refused.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import java.util.stream.Stream;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.testing.Tolerances;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class KvCacheDecodeTest {

    /**
     * The tolerance, relative to the largest |logit|: the cached path computes the same sums as the
     * full forward in other orders (q·kᵀ and att·v as GEMMs over the cache instead of the fused
     * attention, Linears over Tn rows instead of T), each fp32 sum of k ≤ 4C = 128 terms off by at
     * most k·ε = 128 · 6e-8 ≈ 7.6e-6 of Σ|terms|; two blocks and the head compound to about 2e-5.
     * Measured: 3e-7 to 5e-7 (printed).
     */
    static final double LOGITS_TOL = 2e-5;

    static Stream<Arguments> models() {
        return Stream.of(
                Arguments.of("gpt", new GptConfig(29, 16, 2, 4, 32)),
                Arguments.of("llama, grouped-query (4 heads, 2 kv heads)",
                        new LlamaConfig(29, 16, 2, 4, 2, 32, 64, 10_000, 1e-5)),
                Arguments.of("llama, multi-query (4 heads, 1 kv head)",
                        new LlamaConfig(29, 16, 2, 4, 1, 32, 64, 10_000, 1e-5)));
    }

    /** Weights far from an init's small values, so attention is far from uniform: N(0, 0.25), norm gains 1 + N(0, 0.25). */
    static ParamSource largeWeights(long seed) {
        return (spec, first, out, offset, count) -> {
            Random r = new Random(seed * 31 + spec.name().hashCode());
            boolean gain = spec.shape().length == 1 && spec.name().matches(".*(ln\\w*|norm)\\.weight");
            for (long i = 0; i < first; i++) {
                r.nextGaussian();
            }
            for (int i = 0; i < count; i++) {
                out[offset + i] = (float) (0.25 * r.nextGaussian() + (gain ? 1 : 0));
            }
        };
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void everyPositionsLogitsEqualTheFullForwards(String name, ModelConfig config) {
        int t = 13;
        int v = config.vocabSize();
        int[] tokens = new Random(7).ints(t, 0, v).toArray();
        try (Backend be = GradCheck.cpuBackend();
             DecoderModel<?> model = config.create(be, false);
             FullWeights w = FullWeights.bind(model, largeWeights(11), DType.F32)) {
            double[] full = fullForward(be, model, tokens);
            double scale = 0;
            for (double x : full) {
                scale = Math.max(scale, Math.abs(x));
            }
            for (int prefill : new int[] {1, 5, t}) {          // 1: token by token from the start; t: one call
                double[] got = new double[t * v];
                try (KvCache cache = model.newKvCache(config.maxSeqLen())) {
                    int pos = 0;
                    while (pos < t) {
                        int n = pos == 0 ? prefill : 1;
                        int[] chunk = java.util.Arrays.copyOfRange(tokens, pos, pos + n);
                        float[] logits = model.decode(cache, chunk);
                        assertEquals(n * v, logits.length);
                        for (int i = 0; i < logits.length; i++) {
                            got[pos * v + i] = logits[i];
                        }
                        pos += n;
                        assertEquals(pos, cache.length());
                    }
                }
                double err = 0;
                for (int i = 0; i < full.length; i++) {
                    err = Math.max(err, Math.abs(full[i] - got[i]));
                }
                System.out.printf("%s, prefill %d: decoded logits max |err| %.3g·max|logit| (tolerance %.0e)%n", name,
                        prefill, err / scale, LOGITS_TOL);
                Tolerances.assertClose(name + ": decoded logits, prefill " + prefill, full, got, LOGITS_TOL * scale, 0, 0);
            }
            assertEquals(0, be.memory().liveBytes(MemoryCategory.ACTIVATIONS), "decode frees what it allocates");
        }
    }

    @Test
    void aCacheThatWouldPassItsCapacityOrTheContextIsRefused() {
        GptConfig config = new GptConfig(29, 8, 1, 2, 16);
        try (Backend be = GradCheck.cpuBackend();
             DecoderModel<?> model = config.create(be, false);
             FullWeights w = FullWeights.bind(model, largeWeights(3), DType.F32)) {
            IllegalArgumentException big = assertThrows(IllegalArgumentException.class, () -> model.newKvCache(9));
            assertTrue(big.getMessage().contains("1 to 8 positions"), big.getMessage());
            try (KvCache cache = model.newKvCache(8)) {
                model.decode(cache, new int[] {1, 2, 3, 4, 5, 6});
                IllegalArgumentException past = assertThrows(IllegalArgumentException.class,
                        () -> model.decode(cache, new int[] {1, 2, 3}));
                assertTrue(past.getMessage().contains("at position 6 passes the KV cache's 8 positions"), past.getMessage());
                assertEquals(6, cache.length(), "a refused call leaves the cache as it was");
                model.decode(cache, new int[] {1, 2});
                assertEquals(8, cache.length());
                cache.clear();
                assertEquals(0, cache.length());
                model.decode(cache, new int[] {4});
            }
        }
    }

    /** The full forward's logits over tokens (1, T), targets the next tokens (any would do). */
    static double[] fullForward(Backend be, DecoderModel<?> model, int[] tokens) {
        int t = tokens.length;
        int[] targets = new int[t];
        for (int i = 0; i < t; i++) {
            targets[i] = tokens[(i + 1) % t];
        }
        try (Tensor tok = GradCheck.upload(be, tokens, 1, t);
             Tensor tgt = GradCheck.upload(be, targets, 1, t)) {
            model.forward(tok, tgt, UnitHooks.NONE);
            float[] logits = be.toHost(model.logits());
            model.close();
            double[] d = new double[logits.length];
            for (int i = 0; i < d.length; i++) {
                d[i] = logits[i];
            }
            return d;
        }
    }
}
