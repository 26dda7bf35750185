// `fsdp4j plan`: what a run would need per GPU and how fast it would go, before anything runs. The
// model is a preset with overrides, a config.json, or a parameter count with --layers and
// --hidden (the vocabulary is then derived so that the total matches); the machines are --gpus per
// node × --nodes of a --gpu preset. It prints memory by category, communication per step, compute
// and communication time, their ratio and what to change; --explain the arithmetic, --json the
// same figures for machines. The numbers are the runtime's own memory model (Planner).
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.util.Optional;
import java.util.concurrent.Callable;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MixedPrecisionPolicy;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.metrics.JsonFiles;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.model.ModelConfig;
import org.fsdp4j.model.ModelFamily;
import org.fsdp4j.plan.GpuSpec;
import org.fsdp4j.plan.Plan;
import org.fsdp4j.plan.PlanInput;
import org.fsdp4j.plan.Planner;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "plan", mixinStandardHelpOptions = true,
        description = "Predict memory per GPU, communication and step time of a run, and recommend a strategy.")
final class PlanCommand implements Callable<Integer> {

    static final String DEFAULT_GPU = "A100-80GB";

    @Spec
    CommandSpec spec;

    @Option(names = "--preset", paramLabel = "NAME", description = "the model family's preset (default: "
            + GptConfig.FULL_SIZE_PRESET + "; --model llama: " + LlamaConfig.FULL_SIZE_PRESET + ")")
    String preset;

    @Mixin
    ModelOptions model = new ModelOptions();

    @Option(names = "--params", paramLabel = "P", description = "parameter count, e.g. 175e9, with --layers and --hidden "
            + "(the vocabulary is derived from it)")
    Double params;

    @Option(names = "--seq-len", paramLabel = "T", description = "tokens per sequence (default: the model's context)")
    Integer seqLen;

    @Option(names = "--batch-size", paramLabel = "B", description = "sequences per step, all GPUs together (default: one per GPU)")
    Integer batchSize;

    @Option(names = "--gpus", paramLabel = "N", description = "GPUs per node (default: 8)")
    int gpus = 8;

    @Option(names = "--nodes", paramLabel = "M", description = "nodes (default: 1)")
    int nodes = 1;

    @Option(names = "--gpu", paramLabel = "NAME", description = "A100-40GB, A100-80GB, H100-80GB or H200-141GB (default: "
            + DEFAULT_GPU + ")")
    String gpu = DEFAULT_GPU;

    @Option(names = "--strategy", paramLabel = "NAME", description = "full_shard, shard_grad_op, optimizer_only, no_shard, "
            + "hybrid_shard (default: full_shard)")
    String strategy = "full_shard";

    @Option(names = "--shard-group-size", paramLabel = "S", description = "hybrid_shard: shard within groups of S GPUs")
    int shardGroupSize;

    @Option(names = "--param-dtype", paramLabel = "fp32|bf16|fp16", description = "default: bf16")
    String paramDtype = "bf16";

    @Option(names = "--reduce-dtype", paramLabel = "fp32|bf16|fp16", description = "default: the param dtype")
    String reduceDtype;

    @Option(names = "--checkpoint-activations", description = "recompute each block's activations in backward")
    boolean checkpointActivations;

    @Option(names = "--offload", description = "master, gradient shard and optimizer state on the host")
    boolean offload;

    @Option(names = "--prefetch", paramLabel = "K", description = "units all-gathered ahead (default: 1)")
    int prefetch = 1;

    @Option(names = "--micro-batches", paramLabel = "M", description = "forward/backward passes per step (default: 1)")
    int microBatches = 1;

    @Option(names = "--explain", description = "print the arithmetic step by step")
    boolean explain;

    @Option(names = "--json", description = "print the plan as JSON")
    boolean json;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        ModelConfig m = resolveModel();
        int t = seqLen != null ? seqLen : m.maxSeqLen();
        long n = (long) gpus * nodes;
        DType pd = DType.parseFloating(paramDtype);
        DType rd = reduceDtype == null ? pd : DType.parseFloating(reduceDtype);
        if (batchSize == null && n <= Integer.MAX_VALUE && n * microBatches > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("the default --batch-size, --gpus × --nodes × --micro-batches = "
                    + n * microBatches + " sequences, is more than " + Integer.MAX_VALUE + ": give a smaller --batch-size");
        }
        // more GPUs than an int counts: PlanInput refuses them before it looks at the batch
        int batch = batchSize != null ? batchSize : (int) Math.min(Integer.MAX_VALUE, n * microBatches);
        PlanInput in = new PlanInput(m, batch, t, gpus, nodes,
                ShardingStrategy.parse(strategy), shardGroupSize, new MixedPrecisionPolicy(pd, rd), checkpointActivations,
                offload, prefetch, microBatches, Optional.of(GpuSpec.preset(gpu)));
        Plan p = new Planner().plan(in);
        if (json) {
            out.println(JsonFiles.toJson(p));
        } else {
            print(out, p);
        }
        out.flush();
        return ExitCode.OK.code();
    }

    /** A preset with overrides, or --params with --layers and --hidden (a GPT's vocabulary derived). */
    private ModelConfig resolveModel() {
        model.refusePresetWithConfig(preset);
        if (params == null) {
            return model.resolve(preset != null ? preset : model.family().fullSizePreset());
        }
        if (model.family() != ModelFamily.GPT) {
            throw new IllegalArgumentException("--params derives a GPT's vocabulary; for --model llama give --preset and"
                    + " the shape flags");
        }
        if (model.layers == null || model.hidden == null) {
            throw new IllegalArgumentException("--params needs --layers and --hidden (the shape of the blocks)");
        }
        if (model.vocab != null) {
            throw new IllegalArgumentException("give --params or --vocab, not both: --params derives the vocabulary");
        }
        if (!(params > 0) || params > 1e15) {
            throw new IllegalArgumentException("--params must be a positive count up to 1e15, got " + params);
        }
        long c = ModelConfig.checkDimension("--hidden", model.hidden, ModelConfig.MAX_WIDTH);
        long layers = ModelConfig.checkDimension("--layers", model.layers, ModelConfig.MAX_LAYERS);
        int context = ModelConfig.checkDimension(model.context != null ? "--context" : "--seq-len",
                model.context != null ? model.context : seqLen != null ? seqLen : 2048, ModelConfig.MAX_CONTEXT);
        int heads = model.heads != null ? model.heads : c % 128 == 0 ? (int) (c / 128) : c % 64 == 0 ? (int) (c / 64) : 1;
        double blocks = layers * (12.0 * c * c + 13.0 * c);
        long vocab = Math.round((params - blocks - 2.0 * c) / c - context);
        if (vocab < 1) {
            throw new IllegalArgumentException(Format.f("--params %.4g is less than the %d blocks of width %d alone (%.4g "
                    + "parameters): lower --layers or --hidden", params, layers, c, blocks));
        }
        if (vocab > ModelConfig.MAX_VOCAB) {
            throw new IllegalArgumentException(Format.f("--params %.4g leaves %d parameters per width for the embeddings:"
                    + " raise --layers or --hidden", params, vocab));
        }
        if (c % heads != 0) {
            throw new IllegalArgumentException("the width " + c + " is not divisible by " + heads + " heads (--heads)");
        }
        return new GptConfig((int) vocab, context, (int) layers, heads, (int) c);
    }

    private void print(PrintWriter out, Plan p) {
        PlanInput in = p.input();
        ModelConfig m = in.model();
        GpuSpec g = in.gpuSpec();
        out.println(Format.f("fsdp4j plan | %s params: %s %s", billions(p.params()), m.family(), m.describe()));
        out.println(Format.f("  %d x %s (%d node%s x %d) | %s%s | params %s, reduce %s | batch %d x %d (%d per GPU per forward)%s%s",
                in.worldSize(), g.name(), in.nodes(), in.nodes() == 1 ? "" : "s", in.gpusPerNode(), in.strategy().cliName(),
                in.strategy() == ShardingStrategy.HYBRID_SHARD ? " (S = " + in.shardGroupSize() + ")" : "",
                in.precision().paramDtype().shortName(), in.precision().reduceDtype().shortName(), in.globalBatch(),
                in.seqLen(), in.microBatchSize(), in.checkpointActivations() ? " | activation checkpointing" : "",
                in.offload() ? " | offload" : ""));
        Plan.Memory mem = p.memory();
        out.println("memory per GPU:");
        row(out, "params", mem.params(), "fp32 master shard, the all-gather input, or whole parameters");
        row(out, "grads", mem.grads(), "fp32 gradient shard");
        row(out, "optimizer", mem.optimizer(), "AdamW m and v, fp32");
        row(out, "unit buffers", mem.unitBuffers(), "gathered parameters + unsharded gradients at their peak");
        row(out, "workspace", mem.workspace(), "reduce-dtype casts, widened half weights, padded GEMM copies");
        row(out, "activations", mem.activations(), in.checkpointActivations() ? "block inputs + one block recomputed"
                : "every block's saved activations");
        long usable = (long) (g.memoryBytes() * (1 - Planner.MEMORY_RESERVE));
        out.println(Format.f("  %-13s %10s of %s usable: %s", "total", Format.bytes(mem.total()), Format.bytes(usable),
                Boolean.TRUE.equals(p.fits()) ? "fits" : "does NOT fit"));
        if (p.hostBytesPerGpu() > 0) {
            out.println(Format.f("  %-13s %10s per GPU on the host (offloaded)", "host", Format.bytes(p.hostBytesPerGpu())));
        }
        Plan.Comm c = p.comm();
        out.println(Format.f("communication per GPU per step: all-gather %s + reduce-scatter %s + all-reduce %s = %s "
                        + "(%s over NVLink, %s over the network)", gb(c.allGatherBytes()), gb(c.reduceScatterBytes()),
                gb(c.allReduceBytes()), gb(c.total()), gb(c.intraNodeBytes()), gb(c.interNodeBytes())));
        out.println(Format.f("time per step: compute %s (%.3g FLOPs per GPU at %.0f%% of %.0f TFLOP/s), communication %s "
                        + "(NVLink %.0f GB/s, network %.0f GB/s) | T_comm/T_comp = %.2f", Format.duration(p.computeTimeS()),
                p.flopsPerGpu(), 100 * Planner.ASSUMED_MFU, g.peakTflops(in.precision().paramDtype()),
                Format.duration(p.commTimeS()), g.nvlinkGBps(), g.networkGBps(), p.commComputeRatio()));
        Plan.Textbook tb = p.textbook();
        out.println(Format.f("textbook model states per GPU (ZeRO paper, 2 + 2 + 12 = 16 B/param): DDP %s, ZeRO-1 %s, "
                        + "ZeRO-2 %s, ZeRO-3 %s | fsdp4j: %.1f B/param | not 24 B/param (%s): fp32 m and v are 4 B each",
                Format.bytes(tb.ddpBytes()), Format.bytes(tb.zero1Bytes()), Format.bytes(tb.zero2Bytes()),
                Format.bytes(tb.zero3Bytes()), tb.fsdp4jBytesPerParam(), Format.bytes(tb.slip24Bytes())));
        out.println("recommendations:");
        p.recommendations().forEach(r -> out.println("  - " + r));
        if (explain) {
            out.println("how:");
            p.explanation().forEach(l -> out.println("  " + l));
        }
    }

    private static void row(PrintWriter out, String name, long bytes, String what) {
        out.println(Format.f("  %-13s %10s  %s", name, Format.bytes(bytes), what));
    }

    private static String billions(long p) {
        return p >= 1e9 ? Format.f("%.1fB", p / 1e9) : p >= 1e6 ? Format.f("%.1fM", p / 1e6) : String.valueOf(p);
    }

    private static String gb(long bytes) {
        return bytes >= 1e9 ? Format.f("%.1f GB", bytes / 1e9) : Format.f("%.1f MB", bytes / 1e6);
    }
}
