// The planner: from a model's shape and a run's sharding, per-GPU memory by category, the bytes each
// GPU sends per step, compute and communication time on a known GPU, their ratio and what to
// change. Its memory model is the runtime's own, computed from the shapes alone: persistent state
// from each unit's padded flat layout (FlatParamLayout) and the strategy, as ShardedUnit allocates
// it; gathered parameters and unsharded gradients from the engine's UnitBufferPlan; activations as
// each family's model states it allocates and frees them (ModelConfig.activationShape), added up
// here the same way for every family. So the same numbers serve `fsdp4j plan`, the preflight (this
// is its StepCostModel) and the check after a run's first step (MemoryCheck), and the tests hold
// them to the tracker's measurements. Times assume ASSUMED_MFU of the GPU's dense peak for compute
// and the GpuSpec's bus bandwidths for collectives (ring algorithms).
package org.fsdp4j.plan;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.backend.HalfGemmPadding;
import org.fsdp4j.backend.Shapes;
import org.fsdp4j.backend.cpu.CpuBackend;
import org.fsdp4j.fsdp.FlatParamLayout;
import org.fsdp4j.fsdp.UnitBufferPlan;
import org.fsdp4j.metrics.Flops;
import org.fsdp4j.model.ActivationShape;
import org.fsdp4j.model.ModelConfig;

public final class Planner {

    /**
     * Share of the dense peak a training step reaches on a GPU: the FSDP paper measured 55-60% for
     * GPT-175B on A100s, torchtitan 33-58% for Llama 3; 0.5 is a middle.
     */
    public static final double ASSUMED_MFU = 0.5;
    /** Memory a plan leaves free on the GPU: the CUDA context and the caching allocator's fragmentation. */
    public static final double MEMORY_RESERVE = 0.05;
    /** Above this T_comm/T_comp, communication is unlikely to hide behind compute and sharding costs speed. */
    public static final double RATIO_LIMIT = 0.3;

    /**
     * Activation values of one forward the planner counts at most: 2^58, so that their bytes (4 per
     * value at most), added up a few times over, still fit a long.
     */
    public static final long MAX_ACTIVATION_VALUES = 1L << 58;

    private static final long I32 = 4;

    /**
     * The predicted cost of one training step of the run {@code in} (its first step included) on a
     * GPU ({@code onGpu}) or the CPU: their backends keep different workspaces (the CPU widens half
     * weights for OpenBLAS; cuBLAS pads half GEMMs off its grid).
     */
    public StepCost estimate(PlanInput in, boolean onGpu) {
        return estimate(in, onGpu, false);
    }

    /**
     * As above, for a run whose ranks are built: {@code gathersInPlace} when they are in-process
     * fp32 ranks that read shared masters instead of gathering into buffers (the engine's
     * UnitBufferPlan says so), which the memory then counts as no gathered bytes.
     */
    public StepCost estimate(PlanInput in, boolean onGpu, boolean gathersInPlace) {
        Plan p = plan(in, false, onGpu, gathersInPlace);
        Plan.Memory m = p.memory();
        return new StepCost(m.total(), m.persistent(), m.unitBuffers() + m.workspace(), m.activations(),
                p.hostBytesPerGpu(), p.largestBufferBytes(), p.flopsPerGpu() * p.input().worldSize());
    }

    /** The plan for {@code in}, with recommendations. */
    public Plan plan(PlanInput in) {
        return plan(in, true, in.gpu().isPresent(), false);
    }

    /** {@code onGpu}: the run's backend is a GPU's (a plan's GpuSpec, or a resolved device without one). */
    private Plan plan(PlanInput in, boolean recommend, boolean onGpu, boolean gathersInPlace) {
        ModelConfig.checkParameterCount(in.model());            // the sizes below are then counted in a long
        checkActivations(in);
        List<String> why = new ArrayList<>();
        ModelConfig m = in.model();
        int n = in.worldSize();
        int shards = in.fsdp().shardSize();
        int replicas = in.fsdp().replicateSize();
        DType pd = in.precision().paramDtype();
        DType rd = in.precision().reduceDtype();
        long pb = pd.byteSize();
        long params = m.parameterCount();
        why.add(m.parameterFormula());
        why.add(f("run: N = %d GPUs (%d per node × %d nodes), %s, shard groups of S = %d (R = %d copies), params %s, "
                        + "reduce %s, batch %d × %d tokens, %d per GPU per forward, %d micro-batches%s%s",
                n, in.gpusPerNode(), in.nodes(), in.strategy().cliName(), shards, replicas, pd.shortName(),
                rd.shortName(), in.globalBatch(), in.seqLen(), in.microBatchSize(), in.microBatches(),
                in.checkpointActivations() ? ", activation checkpointing" : "", in.offload() ? ", offload" : ""));

        // ---- persistent state and unit buffers, as ShardedUnit and the UnitBufferPlan allocate them
        List<List<ParamSpec>> specs = m.unitSpecs();
        boolean replicated = in.strategy().replicatesParams() || shards == 1;
        boolean fp32OnDevice = pd == DType.F32 && !in.offload();
        long[] unitBytes = new long[specs.size()];
        long padded = 0;
        long shardElems = 0;        // Σ shardNumel: master, gradient shard, m and v each hold this many
        long fullElems = 0;
        long largestUnit = 0;
        long maxParamNumel = 0;
        for (int u = 0; u < specs.size(); u++) {
            FlatParamLayout layout = FlatParamLayout.of(specs.get(u), pd, shards);
            padded += layout.numel();
            shardElems += layout.shardNumel();
            fullElems += layout.numel();
            unitBytes[u] = layout.numel() * pb;
            largestUnit = Math.max(largestUnit, unitBytes[u]);
            for (ParamSpec p : specs.get(u)) {
                maxParamNumel = Math.max(maxParamNumel, p.numel());
            }
        }
        long allUnits = fullElems * pb;
        why.add(f("padding: each parameter 16-byte aligned, each unit padded to a multiple of S: P′ = %,d (+%,d), "
                + "%,d elements per shard", padded, padded - params, shardElems));
        long master = 4 * shardElems;
        long deviceParams;
        if (replicated) {
            deviceParams = fullElems * pb + (fp32OnDevice ? 0 : (in.offload() ? 0 : master));
            why.add(f("params: whole parameters on every GPU, P′·%d B = %s%s", pb, gib(fullElems * pb),
                    fp32OnDevice ? " (they are the fp32 master)" : in.offload() ? " (fp32 master offloaded)"
                            : " + the fp32 master shard 4·P′/S = " + gib(master)));
        } else {
            long gatherInput = fp32OnDevice ? 0 : pb * shardElems;
            deviceParams = (in.offload() ? 0 : master) + gatherInput;
            why.add(f("params: fp32 master shard 4·P′/S = %s%s%s", gib(master), in.offload() ? " (offloaded)" : "",
                    gatherInput > 0 ? f(" + %s all-gather input %d·P′/S = %s", pd.shortName(), pb, gib(gatherInput)) : ""));
        }
        long grads = in.offload() ? 0 : 4 * shardElems;
        long optimizer = in.offload() ? 0 : 8 * shardElems;
        long host = in.offload() ? master + 4 * shardElems + 8 * shardElems : 0;
        why.add(f("grads: fp32 gradient shard 4·P′/S = %s; optimizer: AdamW m and v, 8·P′/S = %s%s",
                gib(4 * shardElems), gib(8 * shardElems), in.offload() ? " (both offloaded to the host)" : ""));

        boolean accumulatesIntoShard = shards == 1 && fp32OnDevice;
        long unitTemps;
        if (in.strategy().reshardsAfterForward() && shards > 1) {
            UnitBufferPlan plan = UnitBufferPlan.of(unitBytes, in.prefetch(), true, gathersInPlace);
            unitTemps = plan.peakBytes();
            why.add(gathersInPlace
                    ? f("unit buffers: %s schedule; the in-process ranks read their shared fp32 masters in place (no"
                            + " gathered buffers): the root's and the last block's unsharded grads where the activations"
                            + " peak, %s", plan.schedule().cliName(), gib(unitTemps))
                    : f("unit buffers: %s schedule, gathered params + unsharded grads peak at %s (budget: %d gathered units "
                    + "+ one gradient = %s)", plan.schedule().cliName(), gib(unitTemps), 1 + in.prefetch(),
                    gib(plan.budgetBytes())));
        } else if (!replicated) {
            unitTemps = allUnits + 2 * largestUnit;
            why.add(f("unit buffers: shard_grad_op keeps every unit gathered from forward to backward (%s) + two unit "
                    + "gradients (%s)", gib(allUnits), gib(2 * largestUnit)));
        } else {
            unitTemps = accumulatesIntoShard ? 0 : 2 * largestUnit;
            why.add(accumulatesIntoShard ? "unit buffers: none (the backward accumulates into the fp32 gradient)"
                    : f("unit buffers: two unit gradients in flight, %s", gib(unitTemps)));
        }
        if (in.microBatches() > 1 && !accumulatesIntoShard) {
            unitTemps += allUnits;
            why.add(f("micro-batches: every unit's unsharded gradient lives until the last one, + %s", gib(allUnits)));
        }
        long workspace = 0;
        if (rd != pd) {
            workspace += largestUnit / pb * rd.byteSize();
        }
        if (pd != DType.F32 && !onGpu) {
            workspace += 2 * 4 * maxParamNumel;      // the CPU GEMM widens a half weight and its gradient (cuBLAS does not)
        }
        if (workspace > 0) {
            why.add(f("workspace: gradient cast to the reduce dtype and widened half weights, %s", gib(workspace)));
        }
        long headPadding = onGpu ? headPaddingBytes(in.microBatchSize() * in.seqLen(), m.vocabSize(),
                m.embedDim(), pd) : 0;
        if (headPadding > 0) {
            workspace += headPadding;
            why.add(f("workspace: the LM head's GEMMs (vocab %d) run on copies padded to cuBLAS's 8-element grid "
                    + "(HalfGemmPadding), %s at their largest", m.vocabSize(), gib(headPadding)));
        }

        // ---- activations, as the model allocates them
        long b = in.microBatchSize();
        Activations act = activations(m, b, in.seqLen(), in.checkpointActivations(), pb,
                !onGpu && CpuBackend.keepsAttentionTriangle(pd));
        long tokens = 2 * I32 * b * in.seqLen() * in.microBatches();
        long activations = act.peakBytes() + tokens;
        why.add(f("activations: b = %d sequences × T = %d per forward, %s peak%s (+ tokens and targets %s)", b,
                in.seqLen(), gib(act.peakBytes()), in.checkpointActivations()
                        ? " (blocks keep only their inputs; one block's internals recomputed at a time)"
                        : " (every block's saved activations at the head's backward)", gib(tokens)));
        Plan.Memory memory = new Plan.Memory(deviceParams, grads, optimizer, unitTemps, workspace, activations);
        why.add(f("memory per GPU: %s persistent + %s unit buffers + %s workspace + %s activations = %s", gib(memory.persistent()),
                gib(unitTemps), gib(workspace), gib(activations), gib(memory.total())));
        long largest = Math.max(act.largestBytes(), largestUnit);

        // ---- communication and time
        Plan.Comm comm = comm(in, unitBytes, shardElems, shards, replicas, why);
        double flops = Flops.trainingStep(m, params, in.globalBatch(), in.seqLen()) / n;
        if (in.checkpointActivations()) {
            flops *= 4.0 / 3;      // the forward (a third of 6P per token) runs twice
        }
        Double compute = null;
        Double commTime = null;
        Double ratio = null;
        Boolean fits = null;
        Optional<GpuSpec> gpu = in.gpu();
        if (gpu.isPresent()) {
            GpuSpec g = gpu.get();
            double peak = g.peakTflops(pd) * 1e12;
            compute = flops / (peak * ASSUMED_MFU);
            commTime = comm.intraNodeBytes() / (g.nvlinkGBps() * 1e9) + comm.interNodeBytes() / (g.networkGBps() * 1e9);
            ratio = commTime / compute;
            long usable = (long) (g.memoryBytes() * (1 - MEMORY_RESERVE));
            fits = memory.total() <= usable;
            why.add(f("compute: (6P + 12·L·C·T) FLOPs per token × %d tokens / N%s = %.3g FLOPs per GPU, at %.0f%% of %s's "
                            + "%.0f TFLOP/s (%s) = %s", in.globalBatch() * (long) in.seqLen(),
                    in.checkpointActivations() ? " × 4/3 (recompute)" : "", flops, 100 * ASSUMED_MFU, g.name(),
                    g.peakTflops(pd), pd.shortName(), secs(compute)));
            why.add(f("communication: %s over NVLink at %.0f GB/s + %s over the network at %.0f GB/s = %s; "
                            + "T_comm/T_comp = %.2f", gb(comm.intraNodeBytes()), g.nvlinkGBps(), gb(comm.interNodeBytes()),
                    g.networkGBps(), secs(commTime), ratio));
            why.add(f("fit: %s needed of %s usable (%s less %.0f%% reserve): %s", gib(memory.total()), gib(usable),
                    gib(g.memoryBytes()), 100 * MEMORY_RESERVE, fits ? "fits" : "does NOT fit"));
        }
        Plan.Textbook textbook = textbook(params, n, memory.persistent(), in.offload() ? host : 0, padded, shards);
        why.add(f("textbook (ZeRO paper, mixed-precision Adam: 2 + 2 + 12 = 16 B/param): DDP 16P = %s, ZeRO-1 4P + 12P/N"
                        + " = %s, ZeRO-2 2P + 14P/N = %s, ZeRO-3 16P/N = %s; fsdp4j keeps %.1f B/param (fp32 gradient "
                        + "shards: 4 + 4 + 8%s); 24P/N = %s counts m and v as 8 B each, but fp32 is 4",
                gib(textbook.ddpBytes()), gib(textbook.zero1Bytes()), gib(textbook.zero2Bytes()), gib(textbook.zero3Bytes()),
                textbook.fsdp4jBytesPerParam(), pd == DType.F32 ? "" : " + " + pb + " for the " + pd.shortName()
                        + " all-gather input", gib(textbook.slip24Bytes())));
        List<String> advice = recommend ? recommendations(in, memory, fits, ratio, compute == null ? 0 : compute,
                commTime == null ? 0 : commTime) : List.of();
        return new Plan(in, params, padded, memory, host, largest, comm, flops, compute, commTime, ratio, fits, advice,
                textbook, List.copyOf(why));
    }

    /**
     * Refuses a run whose activations could not be counted in a long: an upper bound, in exact
     * arithmetic, of the values activations() adds up (every block's (b, T, ·) buffers, three
     * (b, H, T, T) ones, the logits and the tokens), against MAX_ACTIVATION_VALUES.
     */
    static void checkActivations(PlanInput in) {
        ModelConfig m = in.model();
        long b = in.microBatchSize();
        long t = in.seqLen();
        long bound;
        try {
            long tokens = Math.multiplyExact(b, t);
            long mlp = m.mlpWidthBound();
            long block = Math.addExact(Math.multiplyExact(tokens, 16L * m.embedDim() + 4 * mlp),
                    Math.multiplyExact(Math.multiplyExact(tokens, t), 3L * m.numHeads()));
            long head = Math.multiplyExact(tokens, 3L * m.vocabSize() + 8L * in.microBatches());
            bound = tokens > Integer.MAX_VALUE ? Long.MAX_VALUE
                    : Math.addExact(Math.multiplyExact(m.numLayers() + 2L, block), head);
        } catch (ArithmeticException e) {
            bound = Long.MAX_VALUE;
        }
        if (bound > MAX_ACTIVATION_VALUES) {
            throw new IllegalArgumentException(f("one forward of %d sequence%s × %d tokens per GPU through %s holds more"
                    + " activation values than fsdp4j counts (2^58, about 2.9e17): lower --seq-len or --batch-size (or"
                    + " the model's size)", b, b == 1 ? "" : "s", t, m.describe()));
        }
    }

    /** Bytes one GPU sends per step, by collective, and which of them cross nodes. */
    private static Plan.Comm comm(PlanInput in, long[] unitBytes, long shardElems, int shards, int replicas,
                                  List<String> why) {
        long pb = in.precision().paramDtype().byteSize();
        long rb = in.precision().reduceDtype().byteSize();
        int mb = in.microBatches();
        long units = 0;
        for (long u : unitBytes) {
            units += u;
        }
        long unitElems = units / pb;
        long root = unitBytes[0];
        double ag = (shards - 1) / (double) shards;
        double ar = replicas > 1 ? 2.0 * (replicas - 1) / replicas : 0;
        long allGather = 0;
        long reduceScatter = 0;
        long allReduce = 0;
        String how;
        switch (in.strategy()) {
            case FULL_SHARD:
            case HYBRID_SHARD:
                if (shards > 1) {
                    // forward: every unit (the root twice: embedding, then head, which stays gathered for the
                    // backward); backward: every block again but the last, which stays gathered from its
                    // forward when a prefetch depth of 1 or more would have fetched it at once
                    long keptBlock = in.prefetch() >= 1 && unitBytes.length > 1 ? unitBytes[unitBytes.length - 1] : 0;
                    long gathered = 2 * units - keptBlock;
                    UnitBufferPlan plan = UnitBufferPlan.of(unitBytes, in.prefetch(), true);
                    long reduced = unitElems + (plan.reducesEachSegment() ? root / pb : 0);
                    allGather = (long) (perStep(mb, gathered) * ag);
                    reduceScatter = (long) (reduced * rb * ag);
                    allReduce = (long) (ar * (shardElems + (plan.reducesEachSegment() ? root / pb / shards : 0)) * rb);
                    how = f("all-gather (2 × Σ units%s) × (S−1)/S per micro-batch (forward; backward again, the root%s "
                            + "kept), reduce-scatter Σ units × (S−1)/S%s%s", keptBlock > 0 ? " − the last block" : "",
                            keptBlock > 0 ? " and the last block" : "", plan.reducesEachSegment()
                            ? " (the root's twice: root_grad_split)" : "", replicas > 1 ? ", then all-reduce the shard "
                            + "across R: 2(R−1)/R × P′/S" : "");
                } else {
                    allReduce = (long) (ar * unitElems * rb);
                    how = "shard groups of 1: all-reduce the gradients across R: 2(R−1)/R × P′";
                }
                break;
            case SHARD_GRAD_OP:
                allGather = (long) (perStep(mb, units) * ag);
                reduceScatter = (long) (unitElems * rb * ag);
                how = "all-gather Σ units × (S−1)/S per micro-batch (kept through backward), reduce-scatter Σ units × (S−1)/S";
                break;
            case OPTIMIZER_ONLY:
                allReduce = (long) (2.0 * (shards - 1) / shards * unitElems * rb);
                allGather = (long) (units * ag);
                how = "all-reduce the gradients 2(N−1)/N × P′, all-gather the updated parameters (N−1)/N × P′";
                break;
            case NO_SHARD:
            default:
                allReduce = (long) (ar * unitElems * rb);
                how = "all-reduce the gradients 2(N−1)/N × P′ (DDP)";
                break;
        }
        int n = in.worldSize();
        allReduce += (long) (n > 1 ? 2.0 * (n - 1) / n * 2 * 4 : 0);       // the step's loss and Σ g², fp32
        long total = allGather + reduceScatter + allReduce;
        // what crosses nodes: a shard group wider than a node, or the replicate axis across nodes
        long inter;
        if (in.nodes() == 1) {
            inter = 0;
        } else if (in.strategy() == ShardingStrategy.HYBRID_SHARD && shards <= in.gpusPerNode()) {
            inter = allReduce;                       // shard groups inside a node; only the replicate all-reduce crosses
        } else if (in.strategy() == ShardingStrategy.NO_SHARD) {
            inter = total;
        } else {
            inter = total;                           // a ring over every GPU is as slow as its slowest link
        }
        why.add(f("comm per GPU per step: %s; %s all-gather + %s reduce-scatter + %s all-reduce = %s", how,
                gb(allGather), gb(reduceScatter), gb(allReduce), gb(total)));
        return new Plan.Comm(allGather, reduceScatter, allReduce, total - inter, inter);
    }

    /** What {@code bytes} sent once per micro-batch add up to in a step; refused past 2^60, so the sums stay in a long. */
    private static long perStep(int microBatches, long bytes) {
        long total;
        try {
            total = Math.multiplyExact(microBatches, bytes);
        } catch (ArithmeticException e) {
            total = Long.MAX_VALUE;
        }
        if (total > 1L << 60) {
            throw new IllegalArgumentException(f("--micro-batches %d all-gathers %s %d times per step, more bytes than"
                    + " fsdp4j counts (2^60): lower --micro-batches", microBatches, gib(bytes), microBatches));
        }
        return total;
    }

    private static Plan.Textbook textbook(long p, int n, long persistent, long host, long padded, int shards) {
        double perParam = (double) (persistent + host) * shards / padded;
        return new Plan.Textbook(16 * p, 4 * p + 12 * p / n, 2 * p + 14 * p / n, 16 * p / n, 24 * p / n, perParam);
    }

    /**
     * What to change: make it fit (activation checkpointing, offload), the strategy that is
     * fastest among those that fit, and whether sharding pays at this T_comm/T_comp.
     */
    private List<String> recommendations(PlanInput in, Plan.Memory memory, Boolean fits, Double ratio,
                                         double computeTime, double commTime) {
        List<String> out = new ArrayList<>();
        if (in.gpu().isEmpty()) {
            return out;
        }
        List<Option> options = new ArrayList<>();
        List<PlanInput> candidates = new ArrayList<>();
        for (ShardingStrategy s : ShardingStrategy.values()) {
            if (s == ShardingStrategy.HYBRID_SHARD) {
                if (in.nodes() > 1 && in.worldSize() % in.gpusPerNode() == 0) {
                    candidates.add(in.withStrategy(s, in.gpusPerNode()));
                }
            } else {
                candidates.add(in.withStrategy(s, 0));
            }
        }
        for (PlanInput c : List.copyOf(candidates)) {
            candidates.add(c.withCheckpointActivations(!in.checkpointActivations()));
        }
        for (PlanInput c : candidates) {
            Plan p = plan(c, false, true, false);
            if (Boolean.TRUE.equals(p.fits())) {
                options.add(new Option(c, p, Math.max(p.computeTimeS(), p.commTimeS())));
            }
        }
        // fastest first; on a tie, less sharding (fewer collectives to go wrong) and no recomputation
        options.sort(Comparator.comparingDouble(Option::stepS).thenComparingInt(o -> stage(o.input().strategy()))
                .thenComparing(o -> o.input().checkpointActivations()));
        if (!Boolean.TRUE.equals(fits)) {
            if (options.isEmpty()) {
                Plan off = plan(in.withOffload(true).withCheckpointActivations(true), false, true, false);
                out.add(Boolean.TRUE.equals(off.fits())
                        ? f("does not fit in any strategy on the GPU alone: --offload with --checkpoint-activations fits "
                        + "(%s per GPU, %s on the host per GPU)", gib(off.memory().total()), gib(off.hostBytesPerGpu()))
                        : "does not fit even with --offload and --checkpoint-activations: use more GPUs, a smaller batch "
                        + "per GPU or a larger GPU");
            } else {
                out.add(f("does not fit as asked (%s per GPU); %s", gib(memory.total()), describe(options.get(0))));
            }
        } else if (!options.isEmpty()) {
            Option best = options.get(0);
            boolean same = best.input().strategy() == in.strategy()
                    && best.input().checkpointActivations() == in.checkpointActivations();
            out.add(same ? "this configuration is the fastest that fits among the strategies tried"
                    : (best.stepS() < 0.99 * Math.max(computeTime, commTime) ? "faster: " : "as fast, sharding less: ")
                    + describe(best));
        }
        if (ratio != null && ratio > RATIO_LIMIT && in.worldSize() > 1) {
            out.add(f("T_comm/T_comp = %.2f > %.1f: communication is unlikely to hide behind compute, so sharding costs "
                    + "speed here; raise the tokens per GPU (batch, sequence length)%s", ratio, RATIO_LIMIT,
                    in.nodes() > 1 ? ", or shard within a node (hybrid_shard --shard-group-size "
                            + in.gpusPerNode() + ") so that only the gradient all-reduce crosses the network" : ""));
        } else if (ratio != null && in.worldSize() > 1) {
            out.add(f("T_comm/T_comp = %.2f <= %.1f: with prefetching, communication can hide behind compute", ratio,
                    RATIO_LIMIT));
        }
        return List.copyOf(out);
    }

    /** A variant of the asked run that fits, and its step time with communication overlapped. */
    private record Option(PlanInput input, Plan plan, double stepS) {
    }

    private static String describe(Option o) {
        PlanInput in = o.input();
        Plan p = o.plan();
        return f("--strategy %s%s%s (ZeRO-%s): %s per GPU, T_comm/T_comp %.2f, ≈ %s per step", in.strategy().cliName(),
                in.strategy() == ShardingStrategy.HYBRID_SHARD ? " --shard-group-size " + in.shardGroupSize() : "",
                in.checkpointActivations() ? " --checkpoint-activations" : "", zeroStage(in.strategy()),
                gib(p.memory().total()), p.commComputeRatio(), secs(o.stepS()));
    }

    /** The ZeRO stage as a number, for ordering: what is sharded, least first. */
    private static int stage(ShardingStrategy s) {
        return switch (s) {
            case NO_SHARD -> 0;
            case OPTIMIZER_ONLY -> 1;
            case SHARD_GRAD_OP -> 2;
            case FULL_SHARD, HYBRID_SHARD -> 3;
        };
    }

    static String zeroStage(ShardingStrategy s) {
        return switch (s) {
            case FULL_SHARD -> "3";
            case SHARD_GRAD_OP -> "2";
            case OPTIMIZER_ONLY -> "1";
            case NO_SHARD -> "0, DDP";
            case HYBRID_SHARD -> "3 within a node, DDP across";
        };
    }

    // ------------------------------------------------------------------ activations

    /** The peak of one forward + backward's activations on {@code b} sequences, and its largest buffer. */
    record Activations(long peakBytes, long largestBytes) {
    }

    /**
     * The model's activations: (b, T, ·)-sized ones, the attention probabilities and the logits in
     * the param dtype ({@code eb} bytes), norm statistics, per-token losses and rotary tables in
     * fp32. The peak is the largest of the last block's forward, the head's backward (every block's
     * saved activations, the logits and two (b, T, C) gradients) and the last block's backward (its
     * temporaries on top); under checkpointing, blocks keep only their inputs.
     */
    static Activations activations(ModelConfig m, long b, long t, boolean checkpointed, long eb, boolean fusedAttention) {
        Attention a = new Attention(b, m.numHeads(), t, fusedAttention);
        ActivationShape s = m.activationShape(b, t, eb, a.saved(), a.temp());
        long layers = m.numLayers();
        long xb = s.x();
        long peak;
        if (checkpointed) {
            // blocks keep only their outputs (and the embedding's); in backward the last block's output
            // is freed, the residual gradient allocated and the block's internals recomputed
            long kept = (layers + 1) * xb;
            peak = Math.max(kept + s.head() + 2 * xb, kept + Math.max(s.forwardPeak(), s.saved() + s.backwardTemps()));
        } else {
            long forward = xb + layers * (xb + s.saved()) + s.head();
            long lastBlockForward = xb + (layers - 1) * (xb + s.saved()) + xb + s.forwardPeak();
            long headBackward = forward + 2 * xb;                             // dnorm and the residual gradient
            long lastBlockBackward = (layers + 1) * xb + layers * s.saved() + s.backwardTemps();
            peak = Math.max(Math.max(lastBlockForward, headBackward), lastBlockBackward);
        }
        return new Activations(peak + s.perPass(), s.largest());
    }

    /**
     * The attention's (b, H, T, T)-scale buffers, in elements: the probabilities it keeps ({@code
     * saved}), and each score-sized temporary of its forward and backward ({@code temp}). The
     * composite keeps the square and takes temporaries of its size (scores, their gradients); the
     * CPU backend's fused fp32 attention keeps the lower triangle (Ops.causalAttentionSavedShape)
     * and no temporary of that scale (its T×T scratch is per thread, outside the trackers).
     */
    record Attention(long saved, long temp) {
        Attention(long b, long h, long t, boolean fused) {
            this(b * h * (fused ? Shapes.lowerTriangle(t) : t * t), fused ? 0 : b * h * t * t);
        }
    }

    // ------------------------------------------------------------------ formatting

    static String f(String format, Object... args) {
        return String.format(Locale.ROOT, format, args);
    }

    /** Binary units, as the run's logs print memory. */
    static String gib(long bytes) {
        if (bytes >= 1L << 30) {
            return f("%.2f GiB", bytes / (double) (1L << 30));
        }
        if (bytes >= 1L << 20) {
            return f("%.2f MiB", bytes / (double) (1L << 20));
        }
        return f("%.1f KiB", bytes / 1024.0);
    }

    /** Decimal GB for traffic, as nccl-tests counts it. */
    static String gb(long bytes) {
        return bytes >= 1e9 ? f("%.2f GB", bytes / 1e9) : f("%.2f MB", bytes / 1e6);
    }

    static String secs(double s) {
        return s >= 1 ? f("%.2f s", s) : f("%.1f ms", s * 1e3);
    }

    /**
     * The largest workspace of the LM head's three products on a GPU (logits x·Wᵀ, dx = dlogits·W,
     * dW = dlogitsᵀ·x over {@code tokens} rows) where HalfGemmPadding pads them; 0 where it does not.
     */
    static long headPaddingBytes(int tokens, int vocab, int width, DType computeDtype) {
        long logits = HalfGemmPadding.workspaceBytes(false, true, tokens, vocab, width, width, width, vocab, computeDtype);
        long dx = HalfGemmPadding.workspaceBytes(false, false, tokens, width, vocab, vocab, width, width, computeDtype);
        long dw = HalfGemmPadding.workspaceBytes(true, false, vocab, width, tokens, vocab, width, width, computeDtype);
        return Math.max(logits, Math.max(dx, dw));
    }
}
