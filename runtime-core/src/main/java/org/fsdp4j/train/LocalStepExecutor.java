// The single-rank step: every parameter, gradient and optimizer buffer lives unsharded on one
// backend (ParameterStore + OptimizerState), and the model's unit hooks do nothing. It is also
// the reference the FSDP engine's results are compared with.
package org.fsdp4j.train;

import java.util.List;
import java.util.OptionalDouble;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.data.Batch;
import org.fsdp4j.model.GptModel;
import org.fsdp4j.model.ParameterStore;
import org.fsdp4j.model.UnitHooks;
import org.fsdp4j.optim.AdamW;
import org.fsdp4j.optim.GradientClipping;
import org.fsdp4j.optim.OptimizerState;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Tensor;

public final class LocalStepExecutor implements StepExecutor {

    /** Adam's betas and eps: GPT-2/nanoGPT's. */
    private static final float BETA1 = 0.9f;
    private static final float BETA2 = 0.95f;
    private static final float EPS = 1e-8f;

    private final MemoryTracker tracker;
    private final Backend backend;
    private final ParameterStore store;
    private final GptModel model;
    private final AdamW optimizer;          // the lr is set per step from the schedule
    private final OptimizerState optimizerState;
    private final float maxGradNorm;
    private final Tensor tokens;            // (B, T) I32
    private final Tensor targets;           // (B, T) I32

    /** Builds the backend for {@code device} and the initialised model on it. */
    public LocalStepExecutor(TrainConfig config, Device device) {
        this.tracker = new MemoryTracker("rank 0 " + device);
        this.backend = Backends.create(device, tracker, config.cpuThreads());
        try {
            this.model = new GptModel(config.model(), backend, config.checkpointActivations());
            this.store = new ParameterStore(backend, model.units());
            store.initialize(config.seed());
            this.optimizer = optimizerFor(config);
            this.optimizerState = new OptimizerState(backend, store.optimizerTargets(), optimizer);
            this.maxGradNorm = config.maxGradNorm();
            this.tokens = backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, config.batchSize(), config.seqLen());
            this.targets = backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, config.batchSize(), config.seqLen());
        } catch (RuntimeException e) {
            backend.close();
            throw e;
        }
    }

    /** The AdamW every executor trains with (the lr is replaced per step by the schedule's). */
    static AdamW optimizerFor(TrainConfig config) {
        return new AdamW(config.lr(), BETA1, BETA2, EPS, config.weightDecay());
    }

    @Override
    public StepOutcome step(Batch batch, int step, float lr) {
        store.zeroGrads();
        backend.copyFromHost(batch.tokens(), 0, tokens);
        backend.copyFromHost(batch.targets(), 0, targets);
        float loss = model.forward(tokens, targets, UnitHooks.NONE);
        model.backward(UnitHooks.NONE, 1f);
        double sumOfSquares = 0;
        for (int u = 0; u < store.units().size(); u++) {
            sumOfSquares += backend.sumOfSquares(store.flatGrads(u));
        }
        double gradNorm = Math.sqrt(sumOfSquares);
        boolean finite = Double.isFinite(gradNorm);     // inf/NaN gradients never reach the parameters
        if (finite) {
            optimizer.withLr(lr).step(backend, optimizerState.segments(), step,
                    GradientClipping.scale(gradNorm, maxGradNorm));
        }
        return new StepOutcome(loss, gradNorm, !finite);
    }

    @Override
    public long parameterCount() {
        return store.numel();
    }

    @Override
    public int worldSize() {
        return 1;
    }

    @Override
    public String backendName() {
        return backend.name();
    }

    /** One fp32 rank: the device's fp32 GEMM peak (TF32 where the backend uses it). */
    @Override
    public OptionalDouble peakTflopsPerRank() {
        return backend.peakTflops(DType.F32);
    }

    @Override
    public List<MemoryTracker> memoryTrackers() {
        return List.of(tracker);
    }

    /** The parameters (for tests and checkpoints). */
    public ParameterStore parameters() {
        return store;
    }

    @Override
    public void close() {
        model.close();
        tokens.close();
        targets.close();
        optimizerState.close();
        store.close();
        backend.close();
    }
}
