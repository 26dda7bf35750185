// Pretrained weights through the public API: the reference script's Llama safetensors given to
// Fsdp.shard as FsdpOptions' initial values. At one rank and at two the sharded model starts from
// exactly the file's values (stateDict before any step) and its first step's loss is PyTorch's on
// the same weights and batch (llama_tiny_large.bin, LlamaParityChecks' fp32 tolerance). A model the
// files do not fit (a tensor missing, a tensor no parameter takes) makes Fsdp.shard refuse with one
// line naming the tensor, and values asked for before any check are an error, not zeros.
package org.fsdp4j.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.Map;
import java.util.function.Function;
import org.fsdp4j.model.DecoderModel;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.model.ReferenceDump;
import org.fsdp4j.weights.SafetensorsFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SafetensorsWeightsTest {

    /** LlamaParityChecks' fp32 tolerance on the loss (relative). */
    private static final double LOSS_RTOL = 1e-6;

    private static Path resource(String name) {
        try {
            return Path.of(SafetensorsWeightsTest.class.getResource("/reference/" + name).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static SafetensorsWeights llamaWeights() {
        return SafetensorsWeights.open(resource("llama_tiny_large.safetensors"), Function.identity(),
                tensor -> tensor.endsWith(".self_attn.rotary_emb.inv_freq"));
    }

    @ParameterizedTest(name = "N = {0}")
    @ValueSource(ints = {1, 2})
    void aShardedModelStartsFromTheFilesValuesAndGivesPyTorchsLoss(int worldSize) {
        ReferenceDump ref = ReferenceDump.load("/reference/llama_tiny_large.bin");
        LlamaConfig config = (LlamaConfig) ref.config();
        FsdpOptions options = FsdpOptions.builder().worldSize(worldSize).cpuThreads(worldSize).build();
        try (SafetensorsWeights weights = llamaWeights();
             SafetensorsFile file = SafetensorsFile.open(resource("llama_tiny_large.safetensors"));
             ShardedModel model = Fsdp.shard(config.factory(), options.toBuilder().initialValues(weights).build())) {
            Map<String, float[]> start = model.stateDict();
            assertEquals(weights.tensors().keySet(), start.keySet());
            for (Map.Entry<String, float[]> e : start.entrySet()) {
                float[] want = new float[e.getValue().length];
                file.read(e.getKey(), 0, want, 0, want.length);
                assertArrayEquals(want, e.getValue(), e.getKey() + " at N = " + worldSize);
            }
            StepMetrics m = model.step(DecoderModel.batch(ref.batchSize(), ref.seqLen(), ref.ints("tokens"),
                    ref.ints("targets")));
            double refLoss = ref.floats("loss")[0];
            System.out.printf("SafetensorsWeights at N = %d: first loss %.7f, PyTorch's %.7f%n", worldSize, m.loss(),
                    refLoss);
            assertEquals(refLoss, m.loss(), LOSS_RTOL * refLoss, "first loss at N = " + worldSize);
        }
    }

    @Test
    void aModelTheFilesDoNotFitIsRefusedByShardInOneLine() {
        LlamaConfig fits = (LlamaConfig) ReferenceDump.load("/reference/llama_tiny_large.bin").config();
        LlamaConfig deeper = new LlamaConfig(fits.vocabSize(), fits.maxSeqLen(), fits.numLayers() + 1, fits.numHeads(),
                fits.numKvHeads(), fits.embedDim(), fits.hiddenDim(), fits.ropeTheta(), fits.normEps());
        LlamaConfig shallower = new LlamaConfig(fits.vocabSize(), fits.maxSeqLen(), fits.numLayers() - 1,
                fits.numHeads(), fits.numKvHeads(), fits.embedDim(), fits.hiddenDim(), fits.ropeTheta(), fits.normEps());
        try (SafetensorsWeights weights = llamaWeights()) {
            FsdpOptions options = FsdpOptions.builder().worldSize(2).cpuThreads(2).initialValues(weights).build();
            assertOneLine(assertThrows(IllegalArgumentException.class, () -> Fsdp.shard(deeper.factory(), options)),
                    "has no tensor model.layers." + fits.numLayers() + ".");
            assertOneLine(assertThrows(IllegalArgumentException.class, () -> Fsdp.shard(shallower.factory(), options)),
                    "holds tensor model.layers." + (fits.numLayers() - 1) + ".");
        }
    }

    @Test
    void valuesAskedForBeforeACheckAreAnError() {
        try (SafetensorsWeights weights = llamaWeights()) {
            ParamSpec embed = ParamSpec.normal("model.embed_tokens.weight", 0.02, true,
                    weights.tensors().get("model.embed_tokens.weight"));
            assertThrows(IllegalStateException.class, () -> weights.fill(embed, 0, new float[4], 0, 4));
        }
        assertOneLine(assertThrows(IllegalArgumentException.class,
                () -> SafetensorsWeights.open(resource("llama_tiny_large.safetensors").resolveSibling("none.safetensors"))),
                "none.safetensors do not exist");
    }

    private static void assertOneLine(Exception e, String expected) {
        assertTrue(e.getMessage().contains(expected), "expected '" + expected + "' in: " + e.getMessage());
        assertFalse(e.getMessage().contains("\n"), "more than one line: " + e.getMessage());
    }
}
