// Shared by the engine tests: a tiny model (the GPT, or a Llama) whose unit sizes most N do not
// divide (so padding is exercised), fresh random batches per run, the unsharded reference
// trajectory (ParameterStore + the model on one rank: the losses, and every parameter and gradient
// after each step), and
// the comparison of every rank's local shard and gradient shard with the same slice of the
// reference, as FSDP2's parity tests do.
package org.fsdp4j.fsdp;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.IntFunction;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.model.DecoderModel;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.model.ModelConfig;
import org.fsdp4j.model.ParameterStore;
import org.fsdp4j.optim.GradientClipping;
import org.fsdp4j.optim.Optimizer;
import org.fsdp4j.optim.OptimizerState;
import org.fsdp4j.optim.SgdMomentum;

final class FsdpTestSupport {

    /** vocab 37, context 8, 2 layers, 2 heads, width 10: units of 474 (root) and 1330 (block) parameters. */
    static final GptConfig TINY = new GptConfig(37, 8, 2, 2, 10);
    /**
     * vocab 37, context 8, 2 layers, 2 query heads sharing 1 key/value head (head size 6), width 12, MLP 20:
     * units of 900 (root) and 1176 (block) parameters.
     */
    static final LlamaConfig TINY_LLAMA = new LlamaConfig(37, 8, 2, 2, 1, 12, 20, 10_000, 1e-5);
    static final int BATCH = 24;          // divisible by every N tested (1, 2, 3, 4, 8) and by N·M for M ≤ 3
    static final int SEQ = 8;

    /** A global batch of BATCH × SEQ tokens and targets, as the engine's group steps on. */
    static org.fsdp4j.api.Batch batch(int[] tokens, int[] targets) {
        return DecoderModel.batch(BATCH, SEQ, tokens, targets);
    }
    static final int STEPS = 5;
    static final float LR = 0.5f;         // large enough that 5 steps move the parameters visibly
    /** SGD with momentum: the sharper parameter comparison (no Adam normalisation of tiny gradients). */
    static final Optimizer SGD = new SgdMomentum(LR, 0.9f, 0.01f);
    /**
     * Every rank's backend in the engine tests: one thread, and the debug streams (every stream
     * on its own worker with random delays, freed memory poisoned), so an ordering the engine
     * forgets shows up as a wrong result rather than as luck.
     */
    static final BackendOptions RANK_BACKEND = new BackendOptions(1, true);

    /** New each run; a failure prints it, and {@code -Dfsdp4j.testSeed=S} replays that run's data and weights. */
    final long seed = Long.getLong("fsdp4j.testSeed", System.nanoTime());
    final Random random = new Random(seed);
    final int[][] tokens = new int[STEPS][];
    final int[][] targets = new int[STEPS][];
    final ModelConfig model;                      // what every run trains
    final IntFunction<List<Device>> placement;    // where the ranks of a run of N ranks sit
    final IntFunction<RankGroup> groups;          // how N ranks talk

    FsdpTestSupport() {
        this(LocalGroup.Dispatch.HOST_FUNCTIONS);
    }

    FsdpTestSupport(LocalGroup.Dispatch dispatch) {
        this(TINY, dispatch);
    }

    /** {@code model} on CPU ranks whose in-process group runs its collectives as {@code dispatch} says. */
    FsdpTestSupport(ModelConfig model, LocalGroup.Dispatch dispatch) {
        this(model, Device.CPU, n -> new LocalGroup(n, Duration.ofSeconds(30), dispatch));
    }

    /** Ranks on {@code device}, talking through the group {@code groups} makes for N ranks (GPU tests). */
    FsdpTestSupport(Device device, IntFunction<RankGroup> groups) {
        this(TINY, device, groups);
    }

    /** {@code model} on ranks all on {@code device}, talking through the group {@code groups} makes. */
    FsdpTestSupport(ModelConfig model, Device device, IntFunction<RankGroup> groups) {
        this(model, n -> java.util.Collections.nCopies(n, device), groups);
    }

    /** Rank r of N on {@code placement.apply(N).get(r)} (ranks on GPUs of their own, through NCCL). */
    FsdpTestSupport(IntFunction<List<Device>> placement, IntFunction<RankGroup> groups) {
        this(TINY, placement, groups);
    }

    FsdpTestSupport(ModelConfig model, IntFunction<List<Device>> placement, IntFunction<RankGroup> groups) {
        this.model = model;
        this.placement = placement;
        this.groups = groups;
        for (int s = 0; s < STEPS; s++) {
            tokens[s] = randomTokens();
            targets[s] = randomTokens();
        }
    }

    private int[] randomTokens() {
        int[] t = new int[BATCH * SEQ];
        for (int i = 0; i < t.length; i++) {
            t[i] = random.nextInt(model.vocabSize());
        }
        return t;
    }

    /** What one run produced after each step: the loss, and each parameter and gradient by name. */
    record Trajectory(float[] losses, List<Map<String, float[]>> params, List<Map<String, float[]>> grads) {
    }

    /** One rank's view after each step: the step results and the shards of every unit. */
    record RankTrajectory(List<StepMetrics> results, List<List<FsdpEngine.ShardView>> shards) {
    }

    static Backend cpu(String name) {
        return Backends.create(Device.CPU, new MemoryTracker(name), 1);
    }

    /** The unsharded single-rank run: full batch, lossScale 1, the same optimizer and clipping. */
    Trajectory reference(Optimizer optimizer, float maxGradNorm) {
        float[] losses = new float[STEPS];
        List<Map<String, float[]>> params = new ArrayList<>();
        List<Map<String, float[]>> grads = new ArrayList<>();
        try (Backend backend = cpu("reference");
             DecoderModel<?> net = model.create(backend, false);
             ParameterStore store = new ParameterStore(backend, net.units());
             Tensor tok = backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, BATCH, SEQ);
             Tensor tgt = backend.allocate(DType.I32, MemoryCategory.ACTIVATIONS, BATCH, SEQ)) {
            store.initialize(seed);
            try (OptimizerState state = new OptimizerState(backend, store.optimizerTargets(), optimizer)) {
                for (int s = 0; s < STEPS; s++) {
                    store.zeroGrads();
                    backend.copyFromHost(tokens[s], 0, tok);
                    backend.copyFromHost(targets[s], 0, tgt);
                    losses[s] = net.forward(tok, tgt, UnitHooks.NONE);
                    net.backward(UnitHooks.NONE, 1f);
                    double sumSq = 0;
                    for (int u = 0; u < store.units().size(); u++) {
                        sumSq += backend.sumOfSquares(store.flatGrads(u));
                    }
                    optimizer.step(backend, state.segments(), s + 1,
                            GradientClipping.scale(Math.sqrt(sumSq), maxGradNorm));
                    Map<String, float[]> p = new HashMap<>();
                    Map<String, float[]> g = new HashMap<>();
                    for (ParameterStore.Entry e : store.entries()) {
                        p.put(e.spec().name(), store.get(e.spec().name()));
                        g.put(e.spec().name(), store.grad(e.spec().name()));
                    }
                    params.add(p);
                    grads.add(g);
                }
            }
        }
        return new Trajectory(losses, params, grads);
    }

    /**
     * A one-rank engine run seen as a reference trajectory (its single shard holds every
     * parameter whole): the reference for a precision policy, so that a comparison with N ranks
     * under the same policy measures what sharding changes, not what half precision does.
     */
    static Trajectory asReference(RankTrajectory single) {
        float[] losses = new float[STEPS];
        List<Map<String, float[]>> params = new ArrayList<>();
        List<Map<String, float[]>> grads = new ArrayList<>();
        for (int s = 0; s < STEPS; s++) {
            StepMetrics res = single.results().get(s);
            losses[s] = res.loss();
            float unscale = 1f / res.lossScale();
            Map<String, float[]> p = new HashMap<>();
            Map<String, float[]> g = new HashMap<>();
            for (FsdpEngine.ShardView v : single.shards().get(s)) {
                for (ShardSlice sl : v.layout().slices(v.shardIndex())) {
                    if (sl.paramOffset() != 0 || sl.numel() != sl.spec().numel()) {
                        throw new IllegalArgumentException("asReference needs a one-rank run; " + sl.spec().name()
                                + " is split");
                    }
                    float[] pv = new float[(int) sl.numel()];
                    float[] gv = new float[(int) sl.numel()];
                    for (int i = 0; i < pv.length; i++) {
                        pv[i] = v.master()[(int) sl.shardOffset() + i];
                        gv[i] = v.grad()[(int) sl.shardOffset() + i] * unscale;
                    }
                    p.put(sl.spec().name(), pv);
                    g.put(sl.spec().name(), gv);
                }
            }
            params.add(p);
            grads.add(g);
        }
        return new Trajectory(losses, params, grads);
    }

    /** The sharded run: STEPS steps on the same batches, a snapshot of every rank's shards after each. */
    List<RankTrajectory> sharded(FsdpOptions config, Optimizer optimizer, boolean checkpoint) {
        return sharded(config, optimizer, checkpoint, UnaryOperator.identity());
    }

    List<RankTrajectory> sharded(FsdpOptions config, Optimizer optimizer, boolean checkpoint,
                                 UnaryOperator<Communicator> link) {
        return sharded(config, optimizer, checkpoint, link, engine -> { });
    }

    /** As above; {@code setUp} runs on every rank's engine before the first step (tests' hooks). */
    List<RankTrajectory> sharded(FsdpOptions config, Optimizer optimizer, boolean checkpoint,
                                 UnaryOperator<Communicator> link, java.util.function.Consumer<FsdpEngine> setUp) {
        List<RankTrajectory> out = new ArrayList<>();
        for (int r = 0; r < config.worldSize(); r++) {
            out.add(new RankTrajectory(new ArrayList<>(), new ArrayList<>()));
        }
        try (LocalFsdpGroup group = new LocalFsdpGroup(config, ctx -> model.create(ctx.ops(), checkpoint), optimizer,
                seed, placement.apply(config.worldSize()), RANK_BACKEND, link,
                groups.apply(config.worldSize()))) {
            group.onEachRank((r, engine) -> {
                setUp.accept(engine);
                return null;
            });
            for (int s = 0; s < STEPS; s++) {
                List<StepMetrics> results = group.stepEachRank(FsdpTestSupport.batch(tokens[s], targets[s]), optimizer.lr());
                List<List<FsdpEngine.ShardView>> shards = group.onEachRank((r, engine) -> {
                    List<FsdpEngine.ShardView> views = new ArrayList<>();
                    for (int u = 0; u < engine.layouts().size(); u++) {
                        views.add(engine.shard(u));
                    }
                    return views;
                });
                for (int r = 0; r < config.worldSize(); r++) {
                    out.get(r).results().add(results.get(r));
                    out.get(r).shards().add(shards.get(r));
                }
            }
        }
        return out;
    }

    /**
     * Tolerances of one comparison. Elementwise (the default): each element's error relative to
     * its value plus the tensor's largest magnitude. Normwise: each parameter's (and gradient's)
     * ‖got − ref‖₂ / ‖ref‖₂ over the whole tensor, gathered from every shard — the measure for
     * half precision, whose per-element rounding is noise that only the norm averages fairly; a
     * gradient's ‖ref‖₂ is taken as at least its median over the steps (a cancelling step, see
     * assertMatches).
     */
    record Tolerance(double lossRtol, double paramRtol, double gradRtol, boolean normwise) {
        Tolerance(double lossRtol, double paramRtol, double gradRtol) {
            this(lossRtol, paramRtol, gradRtol, false);
        }
    }

    /** The worst error found, each kind normalised as its tolerance is (see assertMatches). */
    record Worst(double lossRel, double param, double grad, String where) {
    }

    /**
     * Every rank's loss, and every element of every local master shard and gradient shard after
     * every step, against the reference; padding must stay exactly zero. An element's error is
     * |got − ref| / (|ref| + max|ref over the parameter|): reordering a sum over the batch
     * perturbs each element by rounding relative to the terms summed, whose scale is the
     * parameter's, not the element's (a near-zero gradient entry is a cancellation).
     * Prints the worst errors, so the tolerances in the tests can be checked against them.
     */
    Worst assertMatches(String what, Trajectory ref, List<RankTrajectory> ranks, Tolerance tol) {
        String ctx = what + " (seed " + seed + ")";
        double lossRel = 0, param = 0, grad = 0;
        String where = "";
        // normwise sums per "step/parameter": Σ(got−ref)², Σref² for params and grads; each shard
        // index counted once (replicas hold the same shard)
        java.util.Map<String, double[]> norms = new java.util.TreeMap<>();
        java.util.Set<String> seenShards = new java.util.HashSet<>();
        for (int r = 0; r < ranks.size(); r++) {
            RankTrajectory rt = ranks.get(r);
            for (int s = 0; s < STEPS; s++) {
                StepMetrics res = rt.results().get(s);
                float unscale = 1f / res.lossScale();      // fp16 gradient shards hold loss-scaled gradients
                lossRel = Math.max(lossRel, Math.abs(res.loss() - ref.losses()[s]) / Math.abs(ref.losses()[s]));
                for (FsdpEngine.ShardView v : rt.shards().get(s)) {
                    boolean firstCopy = seenShards.add(s + "/" + v.unitName() + "/" + v.shardIndex());
                    boolean[] real = new boolean[v.master().length];
                    for (ShardSlice sl : v.layout().slices(v.shardIndex())) {
                        float[] p = ref.params().get(s).get(sl.spec().name());
                        float[] g = ref.grads().get(s).get(sl.spec().name());
                        double pScale = maxAbs(p);
                        double gScale = maxAbs(g);
                        for (int i = 0; i < sl.numel(); i++) {
                            int at = (int) (sl.shardOffset() + i);
                            int pi = (int) (sl.paramOffset() + i);
                            real[at] = true;
                            if (firstCopy) {
                                double[] acc = norms.computeIfAbsent((s + 1) + "/" + sl.spec().name(), k -> new double[4]);
                                double dp = v.master()[at] - p[pi];
                                double dg = v.grad()[at] * unscale - g[pi];
                                acc[0] += dp * dp;
                                acc[1] += (double) p[pi] * p[pi];
                                acc[2] += dg * dg;
                                acc[3] += (double) g[pi] * g[pi];
                            }
                            double pe = Math.abs(v.master()[at] - p[pi]) / (Math.abs(p[pi]) + pScale);
                            double ge = Math.abs(v.grad()[at] * unscale - g[pi]) / (Math.abs(g[pi]) + gScale);
                            if (!(pe <= param)) {
                                param = Double.isNaN(pe) ? Double.POSITIVE_INFINITY : pe;
                                where = "parameter " + sl.spec().name() + "[" + pi + "] rank " + r + " step " + (s + 1)
                                        + ": " + v.master()[at] + " vs " + p[pi];
                            }
                            grad = Math.max(grad, Double.isNaN(ge) ? Double.POSITIVE_INFINITY : ge);
                        }
                    }
                    for (int i = 0; i < real.length; i++) {
                        if (!real[i] && (v.master()[i] != 0f || v.grad()[i] != 0f)) {
                            fail(ctx + ": padding element " + i + " of " + v.unitName() + " on rank " + r
                                    + " is not zero after step " + (s + 1) + " (master " + v.master()[i] + ", grad "
                                    + v.grad()[i] + ")");
                        }
                    }
                }
            }
        }
        if (tol.normwise()) {
            param = 0;
            grad = 0;
            // A step whose reference gradient nearly cancels (a LayerNorm weight's sum over every
            // position came out at a tenth of its other steps' norm in one seed, its error at the
            // usual size) is measured against the parameter's median gradient norm over the steps:
            // the rounding of a sum scales with the terms summed, not with the result (as the
            // elementwise measure uses the tensor's largest magnitude). Never tighter than ‖ref‖.
            java.util.Map<String, Double> medianGradNorm = medianGradNorms(norms);
            for (java.util.Map.Entry<String, double[]> e : norms.entrySet()) {
                double[] acc = e.getValue();
                double pe = Math.sqrt(acc[0] / acc[1]);
                double gNorm = Math.max(Math.sqrt(acc[3]), medianGradNorm.get(parameterOf(e.getKey())));
                double ge = gNorm == 0 ? Math.sqrt(acc[2]) : Math.sqrt(acc[2]) / gNorm;
                if (!(ge <= grad)) {
                    where = "worst gradient at step/parameter " + e.getKey();
                }
                param = Math.max(param, Double.isNaN(pe) ? Double.POSITIVE_INFINITY : pe);
                grad = Math.max(grad, Double.isNaN(ge) ? Double.POSITIVE_INFINITY : ge);
            }
        }
        Worst w = new Worst(lossRel, param, grad, where);
        System.out.printf("%-44s worst error: loss %.2e, params %.2e, grads %.2e%n", what, lossRel, param, grad);
        if (!(lossRel <= tol.lossRtol()) || !(param <= tol.paramRtol()) || !(grad <= tol.gradRtol())) {
            fail(ctx + ": worst errors loss " + lossRel + " (tolerance " + tol.lossRtol() + "), parameters " + param
                    + " (" + tol.paramRtol() + "; " + where + "), gradients " + grad + " (" + tol.gradRtol() + ")");
        }
        return w;
    }

    /** "step/parameter" → "parameter". */
    private static String parameterOf(String stepAndParameter) {
        return stepAndParameter.substring(stepAndParameter.indexOf('/') + 1);
    }

    /** Per parameter, the median over steps of ‖ref gradient‖₂ (norms as assertMatches sums them). */
    private static java.util.Map<String, Double> medianGradNorms(java.util.Map<String, double[]> norms) {
        java.util.Map<String, List<Double>> byParameter = new java.util.TreeMap<>();
        for (java.util.Map.Entry<String, double[]> e : norms.entrySet()) {
            byParameter.computeIfAbsent(parameterOf(e.getKey()), k -> new ArrayList<>()).add(Math.sqrt(e.getValue()[3]));
        }
        java.util.Map<String, Double> median = new java.util.TreeMap<>();
        byParameter.forEach((name, list) -> {
            java.util.Collections.sort(list);
            int n = list.size();
            median.put(name, n % 2 == 1 ? list.get(n / 2) : (list.get(n / 2 - 1) + list.get(n / 2)) / 2);
        });
        return median;
    }

    private static double maxAbs(float[] x) {
        double m = 0;
        for (float f : x) {
            m = Math.max(m, Math.abs(f));
        }
        return m;
    }

    static FsdpOptions config(int n, ShardingStrategy strategy) {
        return FsdpOptions.builder().worldSize(n).collectiveTimeout(Duration.ofSeconds(30)).strategy(strategy)
                .shardGroupSize(strategy == ShardingStrategy.HYBRID_SHARD ? hybridShardSize(n) : 0).build();
    }

    /** Shard groups for HYBRID_SHARD: both axes > 1 where N allows it. */
    static int hybridShardSize(int n) {
        switch (n) {
            case 4: return 2;
            case 8: return 4;
            case 2: return 1;
            default: return n;
        }
    }
}
