// The FSDP engine on one GPU (the one step path at N = 1, through the public API): the same steps as on the CPU backend
// reach the same losses (fp32: to rounding; bf16 compute: to bf16's), each step synchronises the
// host once (the loss and norm read), and in bf16 no GEMM operand is promoted by a copy. Needs a
// GPU; skipped with the probe's reason where there is none.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Fsdp;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardedModel;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.GptModel;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class CudaEngineTest {

    private static final GptConfig MODEL = new GptConfig(256, 64, 2, 4, 64);
    private static final int BATCH = 8;
    private static final int SEQ = 64;
    private static final int STEPS = 5;

    /** Losses of STEPS steps of one rank on {@code device}, trained through the public API. */
    private static float[] losses(String device, DType paramDtype, long seed, int[][] tokens, int[][] targets) {
        FsdpOptions options = FsdpOptions.builder().device(device).precision(new MixedPrecisionPolicy(paramDtype, DType.F32))
                .adamW(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f).seed(seed).cpuThreads(1).build();
        float[] out = new float[STEPS];
        try (ShardedModel m = Fsdp.shard(ctx -> new GptModel(MODEL, ctx.ops(), false), options)) {
            for (int s = 0; s < STEPS; s++) {
                StepMetrics r = m.step(GptModel.batch(BATCH, SEQ, tokens[s], targets[s]));
                out[s] = r.loss();
                if (device.startsWith("cuda")) {
                    assertEquals(1, r.hostSyncs(), "step " + s + ": the loss and norm read only");
                    assertEquals(0, r.promotedCopies(), "step " + s + ": GEMMs in one dtype");
                }
            }
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"fp32", "bf16"})
    @Tag("gpu")
    void oneGpuRankTrainsAsTheCpuDoes(String dtype) {
        StandIns.assumeGpu();
        DType param = DType.parseFloating(dtype);
        long seed = System.nanoTime();
        Random random = new Random(seed);
        int[][] tokens = new int[STEPS][BATCH * SEQ];
        int[][] targets = new int[STEPS][BATCH * SEQ];
        for (int s = 0; s < STEPS; s++) {
            for (int i = 0; i < BATCH * SEQ; i++) {
                tokens[s][i] = random.nextInt(MODEL.vocabSize());
                targets[s][i] = random.nextInt(MODEL.vocabSize());
            }
        }
        float[] gpu = losses("cuda:0", param, seed, tokens, targets);
        float[] cpu = losses("cpu", param, seed, tokens, targets);
        // fp32: the GPU sums in other orders (and TF32 is off by default): a few ulps of a loss of
        // ~5.5 per step, compounded over 5 AdamW steps of lr 1e-3; bf16: activations rounded to
        // 8 significant bits on both (unit roundoff u = 2^-8), in other orders: a couple of u of the loss.
        double tol = param == DType.F32 ? 1e-4 : 2 * 0x1p-8;
        for (int s = 0; s < STEPS; s++) {
            assertEquals(cpu[s], gpu[s], tol * Math.abs(cpu[s]), dtype + " step " + (s + 1) + " (seed " + seed + ")");
        }
    }
}
