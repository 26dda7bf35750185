// The one place the training flags are declared. Each flag maps onto one builder setter: the
// training's own (steps, schedule, data) on TrainConfig's builder, the sharding, precision and
// optimizer ones on the FsdpOptions builder it holds (b.fsdp(f -> f.prefetch(k))). A flag not
// given leaves the command's default in place (train and bench step start from different
// defaults), and TrainConfig validates the result. A new engine knob is a setter of FsdpOptions
// and a flag here.
package org.fsdp4j.cli;

import java.nio.file.Path;
import java.util.Iterator;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.model.ModelFamily;
import org.fsdp4j.train.NonFinitePolicy;
import org.fsdp4j.train.TrainConfig;
import picocli.CommandLine.Option;

final class TrainOptions {

    @Option(names = "--preset", paramLabel = "NAME", completionCandidates = PresetNames.class,
            description = "the model family's preset: ${COMPLETION-CANDIDATES} (default: "
                    + TrainConfig.Builder.DEFAULT_PRESET + "; bench step: " + StepBenchCommand.DEFAULT_PRESET + ")")
    String preset;

    @picocli.CommandLine.Mixin
    ModelOptions model = new ModelOptions();

    @Option(names = "--steps", paramLabel = "K",
            description = "optimizer steps (default: " + TrainConfig.Builder.DEFAULT_STEPS + "; bench step: timed steps, "
                    + StepBenchCommand.DEFAULT_TIMED_STEPS + ")")
    Integer steps;

    @Option(names = "--seed", paramLabel = "S",
            description = "seed of the initial parameters and of the batches (default: " + TrainConfig.Builder.DEFAULT_SEED + ")")
    Long seed;

    @Option(names = "--batch-size", paramLabel = "B",
            description = "sequences per step (default: " + TrainConfig.Builder.DEFAULT_BATCH_SIZE + ")")
    Integer batchSize;

    @Option(names = "--seq-len", paramLabel = "T", description = "tokens per sequence (default: the preset's context)")
    Integer seqLen;

    @Option(names = "--lr", paramLabel = "X", description = "peak learning rate (default: " + TrainConfig.Builder.DEFAULT_LR + ")")
    Float lr;

    @Option(names = "--min-lr", paramLabel = "X", description = "learning rate at the end of the cosine decay (default: lr / 10)")
    Float minLr;

    @Option(names = "--warmup-steps", paramLabel = "K", description = "linear warm-up steps (default: 5%% of the steps)")
    Integer warmupSteps;

    @Option(names = "--weight-decay", paramLabel = "X",
            description = "AdamW weight decay on 2-D weights (default: " + TrainConfig.Builder.DEFAULT_WEIGHT_DECAY + ")")
    Float weightDecay;

    @Option(names = "--max-grad-norm", paramLabel = "X",
            description = "clip the global gradient norm to X; 0 turns clipping off (default: "
                    + TrainConfig.Builder.DEFAULT_MAX_GRAD_NORM + ")")
    Float maxGradNorm;

    @Option(names = "--checkpoint-activations", description = "recompute each block's activations in backward")
    boolean checkpointActivations;

    @Option(names = "--device", paramLabel = "auto|cpu|cuda[:i]",
            description = "where to train; auto takes a usable GPU, else the CPU (default: auto)")
    String device;

    @Option(names = "--cpu-threads", paramLabel = "N", description = "threads the CPU backend may use (default: all cores)")
    Integer cpuThreads;

    @Option(names = "--data", paramLabel = "FILE|DIR",
            description = "train on this file's bytes (its tokens with --tokenizer), or on a folder of token shards"
                    + " (fsdp4j data tokenize's train_*.bin, read in order) (default: the embedded Markov source, whose"
                    + " loss floor is known)")
    Path dataFile;

    @Option(names = "--tokenizer", paramLabel = "T",
            description = "a Hugging Face tokenizer.json (or its folder): --data FILE is tokenized with it, and the"
                    + " model's vocabulary is checked to cover it")
    Path tokenizer;

    @Option(names = "--init-from", paramLabel = "PATH",
            description = "start from pretrained weights instead of the seed's initialisation: a .safetensors file, or a"
                    + " Hugging Face model directory (model.safetensors, or model.safetensors.index.json and its files),"
                    + " in the family's names (--model llama: Hugging Face's LlamaForCausalLM); checked against the"
                    + " model before the first step; each rank reads only its shards' values")
    Path initFrom;

    @Option(names = "--out", paramLabel = "DIR",
            description = "write DIR/summary.json (bench step: DIR/step.json, bench sharding: DIR/sharding.json);"
                    + " checked and locked before the first step")
    Path outDir;

    @Option(names = "--world-size", paramLabel = "N",
            description = "ranks, as threads of this process sharing the CPU cores (default: 1)")
    Integer worldSize;

    @Option(names = "--strategy", paramLabel = "NAME",
            description = "full_shard (ZeRO-3), shard_grad_op (ZeRO-2), optimizer_only (ZeRO-1), no_shard (DDP), "
                    + "hybrid_shard (default: full_shard)")
    String strategy;

    @Option(names = "--shard-group-size", paramLabel = "S",
            description = "hybrid_shard: shard within groups of S ranks, replicate across the N/S groups")
    Integer shardGroupSize;

    @Option(names = "--param-dtype", paramLabel = "fp32|bf16|fp16",
            description = "dtype parameters are all-gathered and computed in; masters stay fp32 (default: fp32)")
    String paramDtype;

    @Option(names = "--reduce-dtype", paramLabel = "fp32|bf16|fp16",
            description = "dtype gradients are reduce-scattered in (default: fp32)")
    String reduceDtype;

    @Option(names = "--prefetch", paramLabel = "K",
            description = "units all-gathered ahead of the one running; 0 gathers on demand (default: 1)")
    Integer prefetch;

    @Option(names = "--micro-batches", paramLabel = "M",
            description = "split each rank's batch into M forward/backward passes; gradients are reduced after the last "
                    + "(default: 1)")
    Integer microBatches;

    @Option(names = "--offload", description = "keep master shard, gradient shard and optimizer state on the host")
    boolean offload;

    @Option(names = "--debug-streams", description = "run every CPU stream on its own worker with random delays and "
            + "poison freed memory, so that work the engine forgot to order shows up as a wrong result (slow; "
            + "also -Dfsdp4j.debugStreams=true)")
    boolean debugStreams;

    @Option(names = "--collective-timeout", paramLabel = "SECONDS",
            description = "abort the run when a collective waits longer than this for a rank (the watchdog); also how"
                    + " long processes wait for each other at start (default: 600)")
    Long collectiveTimeoutSeconds;

    @Option(names = "--on-nonfinite", paramLabel = "stop|skip",
            description = "a step whose loss or gradient norm is inf/NaN: stop the run there, or skip it (the parameters"
                    + " are not updated) up to --max-skipped-steps times (default: stop)")
    String onNonFinite;

    @Option(names = "--max-skipped-steps", paramLabel = "K",
            description = "with --on-nonfinite skip: non-finite steps skipped before the run stops (default: "
                    + NonFinitePolicy.DEFAULT_MAX_SKIPPED_STEPS + ")")
    Integer maxSkippedSteps;

    @Option(names = "--eval-every", paramLabel = "K",
            description = "after every K-th step, the validation loss on a held-out split (the embedded data: a separate"
                    + " trajectory of its chain; --data FILE: the file's last 5%%, then not trained on) in the step line,"
                    + " metrics.jsonl, loss.png and summary.json (default: 0, none)")
    Integer evalEvery;

    @Option(names = "--eval-batches", paramLabel = "M",
            description = "global batches each validation loss averages over, the same ones every time (default: "
                    + TrainConfig.Builder.DEFAULT_EVAL_BATCHES + ")")
    Integer evalBatches;

    /** The model presets of each family, listed in --help: "tiny, small, ... (gpt); tiny, ... (llama)". */
    static final class PresetNames implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            return java.util.Arrays.stream(ModelFamily.values())
                    .map(f -> String.join(", ", f.presetNames()) + " (" + f + ")").iterator();
        }
    }

    /** Overrides the builder's fields with the flags that were given. */
    TrainConfig.Builder applyTo(TrainConfig.Builder b) {
        if (model.family != null) {
            b.family(model.family());
        }
        model.refusePresetWithConfig(preset);
        if (preset != null) {
            b.preset(preset);
        }
        if (model.given()) {
            b.model(model.resolve(b.presetName()));
            if (model.modelConfig != null) {
                b.preset("custom");
            }
        }
        if (steps != null) {
            b.steps(steps);
        }
        if (seed != null) {
            b.fsdp(f -> f.seed(seed));
        }
        if (batchSize != null) {
            b.batchSize(batchSize);
        }
        if (seqLen != null) {
            b.seqLen(seqLen);
        }
        if (lr != null) {
            b.fsdp(f -> f.lr(lr));
        }
        if (minLr != null) {
            b.minLr(minLr);
        }
        if (warmupSteps != null) {
            b.warmupSteps(warmupSteps);
        }
        if (weightDecay != null) {
            b.fsdp(f -> f.weightDecay(weightDecay));
        }
        if (maxGradNorm != null) {
            b.fsdp(f -> f.maxGradNorm(maxGradNorm));
        }
        if (checkpointActivations) {
            b.fsdp(f -> f.activationCheckpointing(true));
        }
        if (device != null) {
            b.fsdp(f -> f.device(device));
        }
        if (cpuThreads != null) {
            b.fsdp(f -> f.cpuThreads(cpuThreads));
        }
        if (tokenizer != null) {
            b.tokenizer(tokenizer);
        }
        if (dataFile != null) {
            b.dataFile(dataFile);
        }
        if (outDir != null) {
            b.outDir(outDir);
        }
        if (initFrom != null) {
            b.initFrom(initFrom);
        }
        if (worldSize != null) {
            b.fsdp(f -> f.worldSize(worldSize));
        }
        if (strategy != null) {
            b.fsdp(f -> f.strategy(ShardingStrategy.parse(strategy)));
        }
        if (shardGroupSize != null) {
            b.fsdp(f -> f.shardGroupSize(shardGroupSize));
        }
        if (paramDtype != null) {
            b.fsdp(f -> f.paramDtype(DType.parseFloating(paramDtype)));
        }
        if (reduceDtype != null) {
            b.fsdp(f -> f.reduceDtype(DType.parseFloating(reduceDtype)));
        }
        if (prefetch != null) {
            b.fsdp(f -> f.prefetch(prefetch));
        }
        if (microBatches != null) {
            b.fsdp(f -> f.microBatches(microBatches));
        }
        if (offload) {
            b.fsdp(f -> f.offload(true));
        }
        if (debugStreams) {
            b.fsdp(f -> f.debugStreams(true));
        }
        if (collectiveTimeoutSeconds != null) {
            b.fsdp(f -> f.collectiveTimeout(java.time.Duration.ofSeconds(collectiveTimeoutSeconds)));
        }
        if (evalEvery != null) {
            b.evalEvery(evalEvery);
        }
        if (evalBatches != null) {
            b.evalBatches(evalBatches);
        }
        if (onNonFinite != null || maxSkippedSteps != null) {
            b.onNonFinite(NonFinitePolicy.parse(onNonFinite == null ? "stop" : onNonFinite, maxSkippedSteps));
        }
        return b;
    }
}
