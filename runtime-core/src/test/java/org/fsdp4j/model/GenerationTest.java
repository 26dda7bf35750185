// The generation loop: greedy tokens from the KV-cached loop are the argmax of a full forward over the
// growing sequence at every step (both families); generation stops at --max-new-tokens or where the
// sequence fills the context, and says which; the same seed gives the same sampled tokens.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class GenerationTest {

    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> models() {
        return KvCacheDecodeTest.models();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void greedyTokensAreTheFullForwardsArgmaxAtEveryStep(String name, ModelConfig config) {
        int[] prompt = {3, 14, 15, 9};
        int v = config.vocabSize();
        try (Backend be = GradCheck.cpuBackend();
             DecoderModel<?> model = config.create(be, false);
             FullWeights w = FullWeights.bind(model, KvCacheDecodeTest.largeWeights(5), DType.F32)) {
            List<Integer> streamed = new ArrayList<>();
            Generation.Result r = Generation.run(model, prompt, 7, new Sampler(0, 0, 0), streamed::add);
            assertEquals(Generation.Stop.MAX_NEW_TOKENS, r.stop());
            assertEquals(7, r.tokens().length);
            assertEquals(Arrays.stream(r.tokens()).boxed().toList(), streamed, "each token is handed on as drawn");
            int[] seq = Arrays.copyOf(prompt, prompt.length + r.tokens().length);
            for (int i = 0; i < r.tokens().length; i++) {
                int len = prompt.length + i;
                double[] full = KvCacheDecodeTest.fullForward(be, model, Arrays.copyOf(seq, len));
                float[] last = new float[v];
                for (int j = 0; j < v; j++) {
                    last[j] = (float) full[(len - 1) * v + j];
                }
                assertEquals(Sampler.argmax(last, 0, v), r.tokens()[i], name + ": greedy token " + i);
                seq[len] = r.tokens()[i];
            }

            // context 16: a prompt of 4 leaves room for 12 tokens
            Generation.Result full = Generation.run(model, prompt, 100, new Sampler(0, 0, 0), t -> { });
            assertEquals(Generation.Stop.CONTEXT, full.stop());
            assertEquals(12, full.tokens().length);
            assertArrayEquals(r.tokens(), Arrays.copyOf(full.tokens(), 7), "the same greedy start");
            assertEquals(Generation.Stop.CONTEXT, Generation.run(model, new int[16], 5, new Sampler(0, 0, 0),
                    t -> { }).stop());
            assertThrows(IllegalArgumentException.class, () -> Generation.run(model, new int[17], 5,
                    new Sampler(0, 0, 0), t -> { }));
            assertThrows(IllegalArgumentException.class, () -> Generation.run(model, new int[] {v}, 5,
                    new Sampler(0, 0, 0), t -> { }));

            int[] a = Generation.run(model, prompt, 10, new Sampler(1.0, 5, 99), t -> { }).tokens();
            int[] b = Generation.run(model, prompt, 10, new Sampler(1.0, 5, 99), t -> { }).tokens();
            assertArrayEquals(a, b, "the same seed, the same tokens");
        }
    }
}
