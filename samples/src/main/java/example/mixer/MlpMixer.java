// A user's program, written against fsdp4j's public API only (org.fsdp4j.api): an MLP-Mixer
// (Tolstikhin et al., 2021) learning to classify synthetic "images" (patches of noise around one
// prototype per class), sharded over N ranks. Run: java -cp fsdp4j.jar example.mixer.MlpMixer [N] [steps]
package example.mixer;

import java.util.Random;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.Fsdp;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.Layers;
import org.fsdp4j.api.ModelFactory;
import org.fsdp4j.api.SequentialModel;
import org.fsdp4j.api.ShardedModel;

public final class MlpMixer {

    static final int PATCHES = 16, PATCH_DIM = 12, CHANNELS = 32, BLOCKS = 2, CLASSES = 10, BATCH = 32;

    private MlpMixer() {
    }

    /** The model: patch embedding, mixer blocks (token mixing across patches, then channel mixing), head. */
    static ModelFactory mixer() {
        return ctx -> {
            SequentialModel.Builder model = SequentialModel.builder(ctx, "patches", "labels")
                    .unit("stem", Layers.linear(PATCH_DIM, CHANNELS));
            for (int i = 0; i < BLOCKS; i++) {
                model.unit("block" + i,
                        Layers.residual(Layers.layerNorm(CHANNELS), Layers.transpose(), Layers.linear(PATCHES, 2 * PATCHES),
                                Layers.gelu(), Layers.linear(2 * PATCHES, PATCHES), Layers.transpose()),
                        Layers.residual(Layers.layerNorm(CHANNELS), Layers.linear(CHANNELS, 4 * CHANNELS), Layers.gelu(),
                                Layers.linear(4 * CHANNELS, CHANNELS)));
            }
            return model.unit("head", Layers.layerNorm(CHANNELS), Layers.meanOverTokens(), Layers.linear(CHANNELS, CLASSES))
                    .build();
        };
    }

    /** Batch {@code step}: each image is its class's prototype plus noise, the same at every world size. */
    static Batch batch(int step) {
        float[][] prototypes = new float[CLASSES][PATCHES * PATCH_DIM];
        Random protos = new Random(7);
        for (float[] p : prototypes) {
            for (int i = 0; i < p.length; i++) {
                p[i] = (float) protos.nextGaussian();
            }
        }
        Random r = new Random(1000 + step);
        float[] patches = new float[BATCH * PATCHES * PATCH_DIM];
        int[] labels = new int[BATCH];
        for (int b = 0; b < BATCH; b++) {
            labels[b] = r.nextInt(CLASSES);
            for (int i = 0; i < PATCHES * PATCH_DIM; i++) {
                patches[b * PATCHES * PATCH_DIM + i] = prototypes[labels[b]][i] + (float) r.nextGaussian();
            }
        }
        return Batch.of(Batch.floats("patches", patches, BATCH, PATCHES, PATCH_DIM), Batch.ints("labels", labels, BATCH));
    }

    /** Trains {@code steps} steps on {@code worldSize} ranks and returns each step's loss. */
    public static float[] train(int worldSize, int steps) {
        FsdpOptions options = FsdpOptions.builder().worldSize(worldSize).adamW(3e-3f, 0.9f, 0.999f, 1e-8f, 0.01f)
                .maxGradNorm(1f).seed(42).build();
        float[] losses = new float[steps];
        try (ShardedModel model = Fsdp.shard(mixer(), options)) {
            for (int s = 0; s < steps; s++) {
                losses[s] = model.step(batch(s)).loss();
            }
        }
        return losses;
    }

    public static void main(String[] args) {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int steps = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        float[] losses = train(n, steps);
        for (int s = 0; s < steps; s++) {
            System.out.printf("step %d loss %.4f%n", s + 1, losses[s]);
        }
    }
}
