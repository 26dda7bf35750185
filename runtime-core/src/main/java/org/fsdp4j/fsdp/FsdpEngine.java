// The FSDP engine of one rank: it shards every unit of a model over the mesh and runs the
// training step as docs/ARCHITECTURE.md ("One step as streams and events") draws it, through the
// model's unit hooks (a unit may run in several segments each way: see UnitHooks). The host
// thread only issues work; streams run it, and cross-stream order comes from events alone:
//   preForward   issue this unit's all-gather (if no prefetch did) and prefetch the next
//                `prefetchDepth` units in forward order (the order the previous pass ran its
//                forward segments in; the unit list on the first pass), then compute waits for
//                this unit's gather and its views are bound
//   postForward  free the gathered params (FULL/HYBRID), except after the root's last forward
//                segment (the backward starts with it, as FSDP2's root does) and, at prefetch
//                depth >= 1, after the last block's (its backward comes next; torchtitan's default)
//   preBackward  gather again if freed (not for a gradients-only segment), bind the unsharded
//                gradient, prefetch the next units in backward order (the reverse of the order of
//                the units' last forward segments), then wait for this unit's gather
//   postBackward free the gathered params; on the last micro-batch queue the gradient's
//                reduction on the reduce stream, after the unit's last segment or, under the
//                ROOT_GRAD_SPLIT plan, after every segment
// An evaluation (evaluate) runs only the forward segments through the same preForward/postForward
// hooks, with every unit freed after its forward (none kept for a backward), the model's saved
// activations released after each micro-batch's forward, no gradient bound or allocated, and
// the optimizer and the loss scaler untouched; its losses are all-reduced as the step's are.
// then the step: compute waits for the reductions, adds (loss, Σ grad²) up on the device,
// all-reduces them, and reads them: the step's one host synchronisation. fp16 overflow and
// clipping are decided from that read; the optimizer updates the fp32 master shards, then the
// cast into the param-dtype shard the next all-gather sends (and, for ZeRO-1, the all-gather of
// the updated parameters) is issued, and the step returns while the device still works.
//
// Every cross-stream wait is one of the Wait values below: a test can switch one off (package
// hook) and watch the debug streams catch it.
//
// Live gathered buffers: at most 1 + prefetchDepth units (the one running and the ones
// prefetched: two at the default depth); none where fp32 CPU ranks that share memory (in one
// process, or processes of one host through shared-memory rings) gather in place (the gathered
// unit is then the group's shared masters: issueGather). Gathered params plus unsharded gradients
// stay within the UnitBufferPlan's budget: two gathered units + one unit's gradient at the default
// depth.
// One reduction is in flight at a time (compute waits for the previous one before the next is
// queued, as FSDP2 does; not before the step's last, which has nothing beside it to bound), which
// bounds the unsharded gradients; under ROOT_GRAD_SPLIT the one in
// flight is freed as soon as the next prefetch needs its room, and that all-gather waits for it.
//
// Streams: compute (the model's), all-gather, reduce-scatter and, for HYBRID_SHARD, an all-reduce
// stream, each with its own communicator (one communicator serves one stream).
package org.fsdp4j.fsdp;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.api.StateSource;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.TrainableModel;
import org.fsdp4j.api.Unit;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommBytes;
import org.fsdp4j.comm.CommTag;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.DeviceMesh;
import org.fsdp4j.comm.Reduction;
import org.fsdp4j.optim.GradientClipping;
import org.fsdp4j.optim.Optimizer;
import org.fsdp4j.optim.ParamSegment;

public final class FsdpEngine implements UnitHooks, AutoCloseable {

    /** One unit's shard as the optimizer sees it, copied to the host (for tests and checkpoints). */
    public record ShardView(String unitName, FlatParamLayout layout, int shardIndex, float[] master, float[] grad) {
    }

    /** The engine's cross-stream waits (see the file comment). */
    enum Wait {
        /** compute reads a unit's parameters only after their all-gather. */
        COMPUTE_ON_ALL_GATHER,
        /** an all-gather runs after the compute issued before it (the optimizer's cast into its input; its buffer's previous use). */
        ALL_GATHER_ON_COMPUTE,
        /** a backward prefetch under ROOT_GRAD_SPLIT lands only once the gradient reduction in flight is done. */
        ALL_GATHER_ON_REDUCTION,
        /** a gradient is reduced only after the backward that wrote it. */
        REDUCE_ON_BACKWARD,
        /** compute queues the next reduction only once the previous one is done (one unsharded gradient in flight). */
        COMPUTE_ON_PREVIOUS_REDUCTION,
        /** the step's norm and optimizer read the gradient shards only after every reduction. */
        COMPUTE_ON_REDUCTIONS,
        /** under offload, the host's optimizer reads gradients only after the device wrote them, and the device reads the updated masters after it. */
        OFFLOAD_HANDOFF,
        /** ZeRO-1: the next forward reads the whole parameters only after their all-gather. */
        COMPUTE_ON_REPLICATED_GATHER
    }

    /** A gradient whose reduction is queued on the reduce stream, and the event after that reduction. */
    private record InFlightReduction(Tensor grad, Backend.Event done) {
    }

    private final TrainableModel model;
    private final Backend device;
    private final Backend optimizerBackend;
    private final FsdpOptions config;
    private final Optimizer optimizer;
    private final DeviceMesh mesh;
    private final Communicator reduceGroup;      // a split of the shard group, used on the reduce stream only
    private final Backend.Stream compute;
    private final Backend.Stream gatherStream;
    private final Backend.Stream reduceStream;
    private final Backend.Stream allReduceStream;   // HYBRID_SHARD: the replicate-axis all-reduce of reduced shards
    private final GradReducer reducer;
    private final LossScaler lossScaler;
    private final List<ShardedUnit> units;       // by unit index: root first, then blocks in forward order
    private final List<ParamSegment> segments;   // every unit's, for the optimizer
    private final UnitBufferPlan plan;
    private final Set<Wait> skippedWaits = EnumSet.noneOf(Wait.class);   // test hook only

    // step state, touched by the rank's thread only
    private List<ShardedUnit> forwardOrder = new ArrayList<>();          // this pass's forward segments, in order
    private List<ShardedUnit> lastForwardOrder = List.of();              // the previous pass's
    private final List<ShardedUnit> postForwardOrder = new ArrayList<>(); // units by their last forward segment
    private ShardedUnit keptForBackward;          // the last block, left gathered after its forward (keepsForBackward)
    private InFlightReduction inFlight;                 // the last reduction queued whose gradient is still held
    private int unitsReduced;                     // units whose last reduction of the step is queued
    private Backend.Event lastReduction;          // the event after the last reduction queued (this step)
    private boolean lastMicroBatch;
    private boolean evaluating;                   // inside evaluate(): postForward frees every unit, keeps none for a backward
    private Tensor normSquared;                  // (1) F32 on the device: Σ g² of the finished shards (offload)
    private int optimizerSteps;
    private boolean closed;

    /**
     * Shards {@code model}'s units over {@code mesh} and initialises every shard from ParamInit
     * with {@code seed} (each rank fills only the elements it holds). {@code device} is the
     * backend the model computes on; {@code optimizerBackend} holds master, gradient shard and
     * optimizer state: {@code device}, or under config.offload() a separate host backend.
     * Collective: every rank constructs its engine.
     */
    public FsdpEngine(TrainableModel model, Backend device, DeviceMesh mesh, FsdpOptions config, Optimizer optimizer,
                      Backend optimizerBackend, long seed) {
        this(model, device, mesh, config, optimizer, optimizerBackend, ParamSource.seeded(seed));
    }

    /**
     * As above, every shard initialised from {@code initialValues}: each rank asks it for exactly
     * the parameter elements its shards hold (pretrained weights load resharded this way).
     */
    public FsdpEngine(TrainableModel model, Backend device, DeviceMesh mesh, FsdpOptions config, Optimizer optimizer,
                      Backend optimizerBackend, ParamSource initialValues) {
        this.model = model;
        this.device = device;
        this.optimizerBackend = optimizerBackend;
        this.config = config;
        this.optimizer = optimizer;
        this.mesh = mesh;
        if (mesh.world().size() != config.worldSize() || mesh.shardSize() != config.shardSize()) {
            throw new IllegalArgumentException("the mesh (" + mesh + " over " + mesh.world().size()
                    + " ranks) does not match the config (" + config.worldSize() + " ranks, shard groups of "
                    + config.shardSize() + ")");
        }
        if (config.offload() == (optimizerBackend == device)) {
            throw new IllegalArgumentException(config.offload()
                    ? "--offload needs a separate host backend for the master shard and optimizer state"
                    : "without --offload the optimizer state lives on the model's backend; pass that backend");
        }
        int rank = mesh.world().rank();
        this.lossScaler = config.precision().needsLossScaling()
                ? LossScaler.dynamic(config.initialLossScale(), config.lossScaleGrowthInterval()) : LossScaler.none();
        this.compute = device.computeStream();
        this.reduceGroup = mesh.shard().split(0, mesh.shard().rank(), "grads");
        List<Backend.Stream> made = new ArrayList<>();
        List<ShardedUnit> built = new ArrayList<>();
        try {
            this.gatherStream = open(made, "all-gather-r" + rank);
            this.reduceStream = open(made, "reduce-scatter-r" + rank);
            boolean hybrid = config.strategy() == ShardingStrategy.HYBRID_SHARD && config.shardSize() > 1
                    && config.replicateSize() > 1;
            this.allReduceStream = hybrid ? open(made, "all-reduce-r" + rank) : null;
            this.reducer = new GradReducer(device, config, reduceGroup, mesh.replicate(), reduceStream, allReduceStream);
            List<ParamSpec> specs = new ArrayList<>();
            model.units().forEach(u -> specs.addAll(u.params()));
            initialValues.check(specs);     // a source that cannot give every parameter fails here, before any fill
            // ranks that share memory (in-process CPU ranks, or processes of one host over shared
            // memory) keep a unit's fp32 masters side by side and gather by reading them in place,
            // which saves a copy per gather; the switch gives each gather its own buffer, for comparison
            Communicator sharesMasters = Fsdp4jSystemProperties.inPlaceGather() && mesh.shard().sharesMemory() ? mesh.shard() : null;
            for (Unit unit : model.units()) {
                FlatParamLayout layout = FlatParamLayout.of(unit.params(), config.precision().paramDtype(),
                        config.shardSize());
                built.add(new ShardedUnit(unit, layout, mesh.shard().rank(), config.strategy().replicatesParams(),
                        device, optimizerBackend, optimizer.stateBuffersPerParam(), initialValues, sharesMasters));
            }
            this.units = List.copyOf(built);
            handOffToDevice();
            gatherReplicatedParams();
        } catch (RuntimeException e) {
            drain(made);
            built.forEach(ShardedUnit::close);
            made.forEach(Backend.Stream::close);
            reduceGroup.close();
            throw e;
        }
        List<ParamSegment> segs = new ArrayList<>();
        units.forEach(u -> segs.addAll(u.segments));
        this.segments = List.copyOf(segs);
        this.plan = UnitBufferPlan.of(layouts(), config, gathersInPlace());
    }

    private Backend.Stream open(List<Backend.Stream> made, String name) {
        Backend.Stream s = device.newStream(name);
        made.add(s);
        return s;
    }

    /** How gathered parameters and unsharded gradients are scheduled to fit the memory model. */
    public UnitBufferPlan plan() {
        return plan;
    }

    /** Whether this rank's units gather in place, reading the shard group's shared fp32 masters (see issueGather). */
    public boolean gathersInPlace() {
        return units.stream().anyMatch(u -> u.shared != null);
    }

    /** P′: parameters plus alignment and shard padding, summed over units. */
    public long paddedParams() {
        return units.stream().mapToLong(u -> u.layout.numel()).sum();
    }

    public List<FlatParamLayout> layouts() {
        return units.stream().map(u -> u.layout).toList();
    }

    /** This rank's master and gradient shard of unit {@code unitIndex} (reads them: a host synchronisation). */
    public ShardView shard(int unitIndex) {
        ShardedUnit u = units.get(unitIndex);
        return new ShardView(u.unit.name(), u.layout, u.shardIndex, optimizerBackend.toHost(u.master),
                optimizerBackend.toHost(u.gradShard));
    }

    /** The buffers a state copy holds per unit: the fp32 master, then the optimizer's state. */
    public List<String> stateBufferNames() {
        List<String> names = new ArrayList<>();
        names.add(ShardedStateDict.PARAM);
        names.addAll(optimizer.stateNames());
        return List.copyOf(names);
    }

    /** The optimizer's step count and the loss scaler's state. */
    public ShardedStateDict.Progress progress() {
        return new ShardedStateDict.Progress(optimizerSteps, lossScaler.scale(), lossScaler.goodSteps());
    }

    /**
     * This rank's state copied to the host, for a checkpoint: each unit's master shard and
     * optimizer state (stateBufferNames), with the slices that say which parameter elements the
     * shard holds. Called between steps; the reads wait for the step's queued update (host
     * synchronisations outside the step).
     */
    public ShardedStateDict.RankShard copyStateToHost() {
        List<ShardedStateDict.UnitShard> out = new ArrayList<>();
        for (ShardedUnit u : units) {
            List<float[]> buffers = new ArrayList<>();
            buffers.add(optimizerBackend.toHost(u.master));
            u.optimizerState.forEach(t -> buffers.add(optimizerBackend.toHost(t)));
            List<ShardedStateDict.Slice> slices = new ArrayList<>();
            for (ShardSlice s : u.layout.slices(u.shardIndex)) {
                slices.add(new ShardedStateDict.Slice(s.spec().name(), s.spec().shape(), s.paramOffset(),
                        Math.toIntExact(s.shardOffset()), Math.toIntExact(s.numel())));
            }
            out.add(new ShardedStateDict.UnitShard(u.unit.name(), slices, buffers));
        }
        return new ShardedStateDict.RankShard(mesh.world().rank(), mesh.shard().rank(), mesh.replicate().rank(), out);
    }

    /**
     * Replaces this rank's master shards and optimizer state with what {@code source} holds for
     * the elements each shard covers (by parameter name and element range, so a state saved at
     * any world size or strategy loads), and continues the optimizer's step count and the loss
     * scaler from {@code progress}. Collective (ZeRO-1 re-gathers the whole parameters): every
     * rank loads before the next step.
     */
    public void loadState(StateSource source, ShardedStateDict.Progress progress) {
        List<String> names = stateBufferNames();
        for (ShardedUnit u : units) {
            int shardNumel = Math.toIntExact(u.layout.shardNumel());
            float[] values = new float[shardNumel];
            for (int k = 0; k < names.size(); k++) {
                java.util.Arrays.fill(values, 0f);                 // padding stays 0
                for (ShardSlice s : u.layout.slices(u.shardIndex)) {
                    source.read(s.spec().name(), names.get(k), s.paramOffset(), values, Math.toIntExact(s.shardOffset()),
                            Math.toIntExact(s.numel()));
                }
                optimizerBackend.copyFromHost(values, 0, k == 0 ? u.master : u.optimizerState.get(k - 1));
            }
        }
        optimizerSteps = progress.optimizerSteps();
        lossScaler.restore(progress.lossScale(), progress.lossScaleGoodSteps());
        handOffToDevice();
        gatherReplicatedParams();
    }

    /** Bytes this rank has sent and received on the engine's communicators so far. */
    public CommBytes commBytes() {
        return mesh.shard().counters().snapshot().plus(reduceGroup.counters().snapshot())
                .plus(mesh.replicate().counters().snapshot()).plus(mesh.world().counters().snapshot());
    }

    /** Test hook: issue the step without this wait, to show that the debug streams catch a missing one. */
    void skipWaitForTest(Wait wait) {
        skippedWaits.add(wait);
    }

    // ------------------------------------------------------------------ the step

    /**
     * One optimizer step over this rank's {@code microBatches} (config.microBatches() of them,
     * together this rank's 1/N of the global batch) at learning rate {@code lr}. Returns after the
     * step's one host synchronisation (the loss and norm read); the update itself may still run.
     * The metrics are this rank's: the same values on every rank but for the counters, and
     * {@code sentBytesPerRank} holds this rank's bytes alone (LocalFsdpGroup.step joins the ranks').
     */
    public StepMetrics step(List<Inputs> microBatches, float lr) {
        if (closed) {
            throw new IllegalStateException("the engine is closed");
        }
        if (microBatches.size() != config.microBatches()) {
            throw new IllegalArgumentException("expected " + config.microBatches() + " micro-batches, got "
                    + microBatches.size());
        }
        CommBytes before = commBytes();
        long syncsBefore = hostSyncs();
        long promotedBefore = device.promotedCopies();
        float scale = lossScaler.scale();
        int m = microBatches.size();
        units.forEach(u -> u.gradShardWritten = false);
        unitsReduced = 0;
        float[] metrics = new float[2];
        // (M + 2) F32: each micro-batch's mean loss (the model's outputs, tracked with the
        // activations), then the step's (Σ loss / (M·N), Σ grad² / R), all-reduced and read at the end
        try (Tensor scalars = device.zeros(DType.F32, MemoryCategory.ACTIVATIONS, m + 2)) {
            Tensor losses = scalars.view(0, m);
            normSquared = scalars.view(m + 1, 1);
            for (int i = 0; i < m; i++) {
                lastMicroBatch = i == m - 1;
                if (!forwardOrder.isEmpty()) {
                    lastForwardOrder = forwardOrder;
                    forwardOrder = new ArrayList<>();
                }
                postForwardOrder.clear();
                model.forward(microBatches.get(i), this, losses.view(i, 1));
                model.backward(this, scale / m);
            }
            finishReductions();
            readMetrics(losses, scalars.view(m, 2), metrics);
            normSquared = null;
        }
        double gradNorm = Math.sqrt(metrics[1]) / scale;
        boolean finite = Double.isFinite(gradNorm);
        boolean skipped = lossScaler.skips(finite);
        if (!skipped) {
            optimizerSteps++;
            float gradScale = GradientClipping.scale(gradNorm, config.maxGradNorm()) / scale;
            if (optimizerBackend != device) {   // the host's optimizer reads the shards the device copied over
                waitFor(optimizerBackend.computeStream(), compute.record(), Wait.OFFLOAD_HANDOFF);
            }
            optimizer.withLr(lr).step(optimizerBackend, segments, optimizerSteps, gradScale);
            handOffToDevice();
            gatherReplicatedParams();
        }
        lossScaler.update(finite);
        return new StepMetrics(metrics[0], gradNorm, skipped, scale, hostSyncs() - syncsBefore,
                device.promotedCopies() - promotedBefore, new long[] {commBytes().minus(before).sentBytes()});
    }

    /**
     * The mean loss over the global batch of which {@code microBatches} are this rank's share
     * (config.microBatches() of them), forward only: each unit is gathered for its forward
     * segments and freed after them, the model's saved activations are released after each
     * micro-batch (no backward follows), and no gradient buffer, optimizer state or loss scale is
     * touched, so the parameters are bit-identical afterwards. The losses are summed over the
     * world exactly as a step sums them (Σ loss / (M·N), one all-reduce, one host read), so on
     * the same batch it equals the loss the step would report before its update. Collective:
     * every rank evaluates its slice of the same batch.
     */
    public float evaluate(List<Inputs> microBatches) {
        if (closed) {
            throw new IllegalStateException("the engine is closed");
        }
        if (microBatches.size() != config.microBatches()) {
            throw new IllegalArgumentException("expected " + config.microBatches() + " micro-batches, got "
                    + microBatches.size());
        }
        int m = microBatches.size();
        float[] out = new float[2];
        evaluating = true;
        // (M + 2) F32: each micro-batch's mean loss, then (Σ loss / (M·N), unused), as the step lays them out
        try (Tensor scalars = device.zeros(DType.F32, MemoryCategory.ACTIVATIONS, m + 2)) {
            Tensor losses = scalars.view(0, m);
            for (int i = 0; i < m; i++) {
                if (!forwardOrder.isEmpty()) {
                    lastForwardOrder = forwardOrder;
                    forwardOrder = new ArrayList<>();
                }
                postForwardOrder.clear();
                model.forward(microBatches.get(i), this, losses.view(i, 1));
                model.close();          // the activations a backward would read: none comes
                releaseGathered();
            }
            postForwardOrder.clear();
            Tensor metrics = scalars.view(m, 2);
            device.sumInto(losses, 1f / (m * config.worldSize()), metrics.view(0, 1));
            if (config.worldSize() > 1) {
                try (CommTag.Scope tag = CommTag.of("the evaluation's loss")) {
                    mesh.world().allReduce(metrics, Reduction.SUM, compute);
                }
            }
            device.copyToHost(metrics, out, 0);
        } finally {
            evaluating = false;
        }
        return out[0];
    }

    /**
     * After an evaluation's forward: frees every unit still gathered (the root's head, or every
     * unit where the strategy keeps them through the forward) and lands any all-gather still in
     * flight, so the next step starts with every unit sharded, as after a backward.
     */
    private void releaseGathered() {
        for (ShardedUnit u : units) {
            if (u.pendingGather != null) {
                unshard(u);
            }
            u.reshard();
        }
        keptForBackward = null;
    }

    /** Host synchronisations of this rank's backends so far. */
    private long hostSyncs() {
        return device.hostSyncs() + (optimizerBackend == device ? 0 : optimizerBackend.hostSyncs());
    }

    /**
     * metrics (2) = (Σ loss / (M·N), Σ grad² / R), summed on the device, all-reduced over the
     * world, and read into {@code out}: the step's one host synchronisation. Σ over the world of
     * this rank's share is the global mean loss; each shard's Σ grad² is counted once though R
     * replicas hold it (under offload the reductions already added it, from the device's copy of
     * each finished shard, before sending the shard to the host).
     */
    private void readMetrics(Tensor losses, Tensor metrics, float[] out) {
        int m = (int) losses.numel();
        device.sumInto(losses, 1f / (m * config.worldSize()), metrics.view(0, 1));
        if (optimizerBackend == device) {
            for (ShardedUnit u : units) {
                device.sumOfSquaresInto(u.gradShard, 1f / config.replicateSize(), metrics.view(1, 1));
            }
        }
        if (config.worldSize() > 1) {
            try (CommTag.Scope tag = CommTag.of("the step's loss and gradient norm")) {
                mesh.world().allReduce(metrics, Reduction.SUM, compute);
            }
        }
        device.copyToHost(metrics, out, 0);
    }

    /** Makes the compute stream (and the host backend, under offload) wait for every reduction of the step. */
    private void finishReductions() {
        if (lastReduction != null) {
            waitFor(compute, lastReduction, Wait.COMPUTE_ON_REDUCTIONS);
            lastReduction = null;
        }
        waitFor(compute, gatherStream.record(), Wait.COMPUTE_ON_ALL_GATHER);   // every all-gather of the step
        if (inFlight != null) {
            inFlight.grad().close();
            inFlight = null;
        }
    }

    /**
     * After the masters changed (or were first written): the param-dtype copies the all-gathers
     * send. Under offload the device waits for the host's optimizer first.
     */
    private void handOffToDevice() {
        if (optimizerBackend != device) {
            waitFor(compute, optimizerBackend.computeStream().record(), Wait.OFFLOAD_HANDOFF);
        }
        units.forEach(ShardedUnit::syncGatherInput);
    }

    /** ZeRO-1 keeps whole parameters on every rank: refresh them from the shards (in-place all-gather). */
    private void gatherReplicatedParams() {
        if (config.strategy() != ShardingStrategy.OPTIMIZER_ONLY || config.shardSize() == 1) {
            return;
        }
        waitFor(gatherStream, compute.record(), Wait.ALL_GATHER_ON_COMPUTE);
        for (ShardedUnit u : units) {
            try (CommTag.Scope tag = CommTag.of("unit " + u.unit.name())) {
                mesh.shard().allGather(u.gatherInput, u.full, gatherStream);
            }
        }
        waitFor(compute, gatherStream.record(), Wait.COMPUTE_ON_REPLICATED_GATHER);
    }

    // ------------------------------------------------------------------ unit hooks

    @Override
    public void preForward(Unit unit) {
        ShardedUnit u = units.get(unit.index());
        releaseKeptUnless(u);
        prefetch(u, null);
        int at = forwardOrder.size();
        forwardOrder.add(u);
        List<ShardedUnit> order = lastForwardOrder.isEmpty() ? units : lastForwardOrder;
        for (int k = 1; k <= config.prefetch() && at + k < order.size(); k++) {
            prefetch(order.get(at + k), null);
        }
        unshard(u);   // waits only now: the prefetches above queued behind u's gather without a wait between
    }

    @Override
    public void postForward(Unit unit, boolean last) {
        ShardedUnit u = units.get(unit.index());
        if (last) {
            postForwardOrder.add(u);
        }
        if (evaluating) {
            u.reshard();        // no backward comes: nothing stays gathered for one (persistent units stay as they are)
            return;
        }
        if (!config.strategy().reshardsAfterForward() || (last && u.isRoot())) {
            return;
        }
        if (last && keepsForBackward(u)) {
            keptForBackward = u;
        } else {
            u.reshard();
        }
    }

    /**
     * Whether u, having run its last forward segment, stays gathered into the backward: it is the
     * last block of the forward order (the previous pass's; the unit list on the first pass), so
     * its backward comes first after the root's head and its prefetch would start right away. Only
     * with a prefetch depth of at least 1, where that prefetch already counts toward the budget:
     * the head runs with the root and this block gathered either way (torchtitan's default).
     */
    private boolean keepsForBackward(ShardedUnit u) {
        if (u.isRoot() || config.prefetch() < 1) {
            return false;
        }
        List<ShardedUnit> order = lastForwardOrder.isEmpty() ? units : lastForwardOrder;
        for (int k = order.size() - 1; k >= 0; k--) {
            if (!order.get(k).isRoot()) {
                return order.get(k) == u;
            }
        }
        return false;
    }

    /** Frees the block kept gathered after its forward when another block runs first (a pass in another order). */
    private void releaseKeptUnless(ShardedUnit u) {
        if (keptForBackward != null && keptForBackward != u && !u.isRoot()) {
            keptForBackward.reshard();
            keptForBackward = null;
        }
    }

    @Override
    public void preBackward(Unit unit, boolean readsParams) {
        ShardedUnit u = units.get(unit.index());
        releaseKeptUnless(u);
        if (keptForBackward == u) {
            keptForBackward = null;   // its backward starts: from here it is freed as any unit is
        }
        if (readsParams) {
            prefetch(u, null);   // u's own gather first (if no prefetch issued it); the wait comes after the prefetches
        }
        unit.bindGrads(u.layout.views(u.beginGradAccumulation()));
        if (!readsParams) {
            return;
        }
        List<ShardedUnit> backwardOrder = new ArrayList<>(postForwardOrder);
        Collections.reverse(backwardOrder);
        int at = backwardOrder.indexOf(u);
        Backend.Event after = null;
        boolean prefetches = at >= 0 && config.prefetch() > 0 && at + 1 < backwardOrder.size()
                && backwardOrder.get(at + 1).state == ShardedUnit.ShardState.SHARDED
                && backwardOrder.get(at + 1).pendingGather == null;
        if (prefetches && plan.prefetchWaitsForReduction() && inFlight != null) {
            // the prefetch takes the room of the gradient in flight: free it now (its reduction
            // still reads it: the reduce stream was recorded on it) and let the all-gather wait
            after = inFlight.done();
            inFlight.grad().close();
            inFlight = null;
        }
        for (int k = 1; at >= 0 && k <= config.prefetch() && at + k < backwardOrder.size(); k++) {
            prefetch(backwardOrder.get(at + k), after);
        }
        unshard(u);
    }

    @Override
    public void postBackward(Unit unit, boolean last) {
        ShardedUnit u = units.get(unit.index());
        unit.unbindGrads();
        u.reshard();
        if (lastMicroBatch && (last || plan.reducesEachSegment())) {
            Tensor grad = u.unshardedGrad;
            u.unshardedGrad = null;
            boolean accumulate = u.gradShardWritten;   // a later segment of this step adds to the shard
            u.gradShardWritten = true;
            if (!reducer.hasWork(u, grad)) {
                return;   // one rank, fp32: the backward accumulated straight into the gradient shard
            }
            if (last) {
                unitsReduced++;
            }
            if (inFlight != null) {
                // One reduction in flight at a time bounds the unsharded gradients while the backward
                // goes on allocating. The step's last reduction has nothing left to run beside it, so
                // it queues right behind the previous one (whose gradient the reduce stream was
                // recorded on: freed now, its block is reused only after that reduction).
                if (!(last && unitsReduced == units.size())) {
                    waitFor(compute, inFlight.done(), Wait.COMPUTE_ON_PREVIOUS_REDUCTION);
                }
                inFlight.grad().close();
                inFlight = null;
            }
            waitFor(reduceStream, compute.record(), Wait.REDUCE_ON_BACKWARD);
            if (grad != u.gradShard) {
                device.recordStream(grad, reduceStream);
            }
            reducer.reduce(u, grad, accumulate, last, normSquared);
            // the all-reduce stream waited for the reduce-scatter, so its event covers both
            lastReduction = (allReduceStream != null ? allReduceStream : reduceStream).record();
            if (grad != u.gradShard) {
                inFlight = new InFlightReduction(grad, reduceStream.record());
            }
        }
    }

    /** Makes u's parameters gathered and bound: compute waits for its all-gather (issued now if no prefetch did). */
    private void unshard(ShardedUnit u) {
        if (u.state == ShardedUnit.ShardState.UNSHARDED) {
            return;
        }
        if (u.pendingGather == null) {
            issueGather(u, null);
        }
        waitFor(compute, u.pendingGather.done(), Wait.COMPUTE_ON_ALL_GATHER);
        u.gathered = u.pendingGather.output();
        u.pendingGather = null;
        u.state = ShardedUnit.ShardState.UNSHARDED;
        u.unit.bindParams(u.layout.views(u.gathered));
    }

    /** Issues u's all-gather ahead of its use, unless it is gathered or on its way. */
    private void prefetch(ShardedUnit u, Backend.Event after) {
        if (u.state == ShardedUnit.ShardState.SHARDED && u.pendingGather == null) {
            issueGather(u, after);
        }
    }

    /**
     * Queues u's all-gather on the all-gather stream into a buffer allocated for the compute
     * stream (which reads it and frees it), after the compute issued so far and, if given,
     * after {@code after}. Where the group keeps u's masters in one shared buffer, that buffer
     * is the output and the all-gather only meets the other ranks: from then on each rank's
     * update of its own chunk (the step's optimizer) is already done, and the next one comes only
     * after this step's last reduce-scatter, which no rank reaches before its backward has read
     * the parameters for the last time.
     */
    private void issueGather(ShardedUnit u, Backend.Event after) {
        Tensor out = u.newGathered();
        waitFor(gatherStream, compute.record(), Wait.ALL_GATHER_ON_COMPUTE);
        if (after != null) {
            waitFor(gatherStream, after, Wait.ALL_GATHER_ON_REDUCTION);
        }
        try (CommTag.Scope tag = CommTag.of("unit " + u.unit.name())) {
            mesh.shard().allGather(u.gatherInput, out, gatherStream);
        }
        u.pendingGather = new ShardedUnit.PendingGather(out, gatherStream.record());
    }

    /** {@code stream} waits for {@code event}, unless a test switched this wait off. */
    private void waitFor(Backend.Stream stream, Backend.Event event, Wait wait) {
        if (!skippedWaits.contains(wait)) {
            stream.waitFor(event);
        }
    }

    // ------------------------------------------------------------------ teardown

    /** Lets the streams finish (queued work fails fast once the group is aborted), then frees every buffer. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        List<Backend.Stream> streams = new ArrayList<>(List.of(compute, gatherStream, reduceStream));
        if (allReduceStream != null) {
            streams.add(allReduceStream);
        }
        drain(streams);
        if (optimizerBackend != device) {
            drain(List.of(optimizerBackend.computeStream()));
        }
        model.close();
        if (inFlight != null) {
            inFlight.grad().close();
            inFlight = null;
        }
        units.forEach(ShardedUnit::close);
        gatherStream.close();
        reduceStream.close();
        if (allReduceStream != null) {
            allReduceStream.close();
        }
        reduceGroup.close();
    }

    /** Waits for each stream's queued work, ignoring its failure (it was reported where it happened). */
    private static void drain(List<Backend.Stream> streams) {
        for (Backend.Stream s : streams) {
            try {
                s.synchronize();
            } catch (RuntimeException ignored) {
                // the step that failed has already thrown it
            }
        }
    }
}
