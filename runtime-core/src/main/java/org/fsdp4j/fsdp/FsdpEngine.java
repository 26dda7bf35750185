// The FSDP engine of one rank: it shards every unit of a model over the mesh and runs the
// training step exactly as DESIGN.md "One training step" draws it, through the model's unit
// hooks (a unit may run in several segments each way: see UnitHooks):
//   preForward   wait for this unit's all-gather (issue it if no prefetch did), bind views,
//                prefetch the next `prefetchDepth` units in forward order (the order the
//                previous pass ran its forward segments in; the unit list on the first pass)
//   postForward  free the gathered params (FULL/HYBRID), except after the root's last forward
//                segment: the backward starts with it, as FSDP2's root does
//   preBackward  gather again if freed (not for a gradients-only segment), bind the unsharded
//                gradient, prefetch the next units in backward order (the reverse of the order
//                of the units' last forward segments)
//   postBackward free the gathered params; on the last micro-batch queue the gradient's
//                reduction on the reduce stream (waiting for the previous one first, so one
//                unsharded gradient is in flight at a time, as FSDP2 does), after the unit's last
//                segment or, under the ROOT_GRAD_SPLIT plan, after every segment
// then the step: wait for the reductions, one all-reduce of (loss, Σ grad²), fp16 overflow
// check, clipping, and the optimizer on the fp32 master shards only, followed by the cast into
// the param-dtype shard the next all-gather sends (and, for ZeRO-1, the all-gather of the
// updated parameters).
//
// Live gathered buffers: at most 1 + prefetchDepth units (the one running and the ones
// prefetched: two at the default depth). Gathered params plus unsharded gradients stay within
// the UnitBufferPlan's budget: two gathered units + one unit's gradient at the default depth.
//
// Threads: the rank's own thread computes; the all-gather stream, the reduce stream and (for
// HYBRID_SHARD's all-reduce across replicas) the all-reduce stream are HostStreams, each with
// its own communicator, so calls on one communicator are always issued from one thread in the
// same order on every rank.
package org.fsdp4j.fsdp;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommBytes;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.DeviceMesh;
import org.fsdp4j.comm.Reduction;
import org.fsdp4j.model.TrainableModel;
import org.fsdp4j.model.Unit;
import org.fsdp4j.model.UnitHooks;
import org.fsdp4j.optim.Optimizer;
import org.fsdp4j.optim.ParamSegment;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.Tensor;
import org.fsdp4j.optim.GradientClipping;

public final class FsdpEngine implements UnitHooks, AutoCloseable {

    /** One unit's shard as the optimizer sees it, copied to the host (for tests and checkpoints). */
    public record ShardView(String unitName, FlatParamLayout layout, int shardIndex, float[] master, float[] grad) {
    }

    private final TrainableModel model;
    private final Backend device;
    private final Backend optimizerBackend;
    private final FsdpConfig config;
    private final Optimizer optimizer;
    private final DeviceMesh mesh;
    private final Communicator reduceGroup;      // a split of the shard group, used by the reduce stream only
    private final HostStream gatherStream;
    private final HostStream reduceStream;
    private final HostStream allReduceStream;    // HYBRID_SHARD: the replicate-axis all-reduce of reduced shards
    private final GradReducer reducer;
    private final LossScaler lossScaler;
    private final List<ShardedUnit> units;       // by unit index: root first, then blocks in forward order
    private final List<ParamSegment> segments;   // every unit's, for the optimizer
    private final UnitBufferPlan plan;

    // step state, touched by the rank's thread only
    private List<ShardedUnit> forwardOrder = new ArrayList<>();          // this pass's forward segments, in order
    private List<ShardedUnit> lastForwardOrder = List.of();              // the previous pass's
    private final List<ShardedUnit> postForwardOrder = new ArrayList<>(); // units by their last forward segment
    private final List<CompletableFuture<Void>> reductions = new ArrayList<>();      // reduce-scatters: free the unsharded grads
    private final List<CompletableFuture<Void>> allReductions = new ArrayList<>();   // their HYBRID all-reduce phases
    private boolean lastMicroBatch;
    private int optimizerSteps;
    private boolean closed;

    /**
     * Shards {@code model}'s units over {@code mesh} and initialises every shard from ParamInit
     * with {@code seed} (each rank fills only the elements it holds). {@code optimizerBackend}
     * holds master, gradient shard and optimizer state: the model's backend, or under
     * config.offload() a separate host backend. Collective: every rank constructs its engine.
     */
    public FsdpEngine(TrainableModel model, DeviceMesh mesh, FsdpConfig config, Optimizer optimizer,
                      Backend optimizerBackend, long seed) {
        this.model = model;
        this.device = model.backend();
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
        this.reduceGroup = mesh.shard().split(0, mesh.shard().rank(), "grads");
        this.gatherStream = new HostStream("allgather-r" + rank);
        this.reduceStream = new HostStream("reduce-r" + rank);
        this.allReduceStream = new HostStream("allreduce-r" + rank);
        this.reducer = new GradReducer(device, optimizerBackend, config, reduceGroup, mesh.replicate());
        List<ShardedUnit> built = new ArrayList<>();
        try {
            for (Unit unit : model.units()) {
                FlatParamLayout layout = FlatParamLayout.of(unit.params(), config.precision().paramDtype(),
                        config.shardSize());
                built.add(new ShardedUnit(unit, layout, mesh.shard().rank(), config.strategy().replicatesParams(),
                        device, optimizerBackend, optimizer.stateBuffersPerParam(), seed));
            }
            this.units = List.copyOf(built);
            gatherReplicatedParams();
        } catch (RuntimeException e) {
            built.forEach(ShardedUnit::close);
            closeStreams();
            reduceGroup.close();
            throw e;
        }
        List<ParamSegment> segs = new ArrayList<>();
        units.forEach(u -> segs.addAll(u.segments));
        this.segments = List.copyOf(segs);
        this.plan = UnitBufferPlan.of(layouts(), config);
    }

    /** How gathered parameters and unsharded gradients are scheduled to fit the memory model. */
    public UnitBufferPlan plan() {
        return plan;
    }

    /** P′: parameters plus alignment and shard padding, summed over units. */
    public long paddedParams() {
        return units.stream().mapToLong(u -> u.layout.numel()).sum();
    }

    public List<FlatParamLayout> layouts() {
        return units.stream().map(u -> u.layout).toList();
    }

    /** This rank's master and gradient shard of unit {@code unitIndex}. */
    public ShardView shard(int unitIndex) {
        ShardedUnit u = units.get(unitIndex);
        return new ShardView(u.unit.name(), u.layout, u.shardIndex, optimizerBackend.toHost(u.master),
                optimizerBackend.toHost(u.gradShard));
    }

    /** Bytes this rank has sent and received on the engine's communicators so far. */
    public CommBytes commBytes() {
        return mesh.shard().counters().snapshot().plus(reduceGroup.counters().snapshot())
                .plus(mesh.replicate().counters().snapshot()).plus(mesh.world().counters().snapshot());
    }

    // ------------------------------------------------------------------ the step

    /**
     * One optimizer step over this rank's {@code microBatches} (config.microBatches() of them,
     * together this rank's 1/N of the global batch) at learning rate {@code lr}.
     */
    public FsdpStepResult step(List<MicroBatch> microBatches, float lr) {
        if (closed) {
            throw new IllegalStateException("the engine is closed");
        }
        if (microBatches.size() != config.microBatches()) {
            throw new IllegalArgumentException("expected " + config.microBatches() + " micro-batches, got "
                    + microBatches.size());
        }
        CommBytes before = commBytes();
        float scale = lossScaler.scale();
        int m = microBatches.size();
        double lossSum = 0;
        units.forEach(u -> u.gradShardWritten = false);
        for (int i = 0; i < m; i++) {
            lastMicroBatch = i == m - 1;
            if (!forwardOrder.isEmpty()) {
                lastForwardOrder = forwardOrder;
                forwardOrder = new ArrayList<>();
            }
            postForwardOrder.clear();
            MicroBatch mb = microBatches.get(i);
            lossSum += model.forward(mb.tokens(), mb.targets(), this);
            model.backward(this, scale / m);
        }
        for (CompletableFuture<Void> r : reductions) {
            await(r, "gradient reduction");
        }
        for (CompletableFuture<Void> r : allReductions) {
            await(r, "gradient all-reduce across replicas");
        }
        reductions.clear();
        allReductions.clear();

        // One all-reduce for the reported loss and the norm: Σ over world of loss/N is the global
        // mean; Σ of (Σ grad² of this shard)/R counts each shard once though R ranks hold it.
        double sumOfSquares = 0;
        for (ParamSegment s : segments) {
            sumOfSquares += optimizerBackend.sumOfSquares(s.grad());
        }
        float[] metrics = {(float) (lossSum / m / config.worldSize()), (float) (sumOfSquares / config.replicateSize())};
        if (config.worldSize() > 1) {
            try (Tensor t = device.allocate(DType.F32, MemoryCategory.WORKSPACE, 2)) {
                device.copyFromHost(metrics, 0, t);
                mesh.world().allReduce(t, Reduction.SUM).await();
                device.copyToHost(t, metrics, 0);
            }
        }
        double gradNorm = Math.sqrt(metrics[1]) / scale;
        boolean finite = Double.isFinite(gradNorm);
        boolean skipped = lossScaler.skips(finite);
        if (!skipped) {
            optimizerSteps++;
            float gradScale = GradientClipping.scale(gradNorm, config.maxGradNorm()) / scale;
            optimizer.withLr(lr).step(optimizerBackend, segments, optimizerSteps, gradScale);
            units.forEach(ShardedUnit::syncGatherInput);
            gatherReplicatedParams();
        }
        lossScaler.update(finite);
        return new FsdpStepResult(metrics[0], gradNorm, skipped, scale, commBytes().minus(before));
    }

    /** ZeRO-1 keeps whole parameters on every rank: refresh them from the shards (in-place all-gather). */
    private void gatherReplicatedParams() {
        if (config.strategy() != ShardingStrategy.OPTIMIZER_ONLY || config.shardSize() == 1) {
            return;
        }
        List<CompletableFuture<Void>> done = new ArrayList<>();
        for (ShardedUnit u : units) {
            done.add(gatherStream.submit(() -> {
                mesh.shard().allGather(u.gatherInput, u.full).await();
                return null;
            }));
        }
        for (int i = 0; i < done.size(); i++) {
            await(done.get(i), "unit " + units.get(i).unit.name() + ": all-gather of the updated parameters");
        }
    }

    // ------------------------------------------------------------------ unit hooks

    @Override
    public void preForward(Unit unit) {
        ShardedUnit u = units.get(unit.index());
        unshard(u, "forward");
        int at = forwardOrder.size();
        forwardOrder.add(u);
        List<ShardedUnit> order = lastForwardOrder.isEmpty() ? units : lastForwardOrder;
        for (int k = 1; k <= config.prefetchDepth() && at + k < order.size(); k++) {
            prefetch(order.get(at + k), null);
        }
    }

    @Override
    public void postForward(Unit unit, boolean last) {
        ShardedUnit u = units.get(unit.index());
        if (last) {
            postForwardOrder.add(u);
        }
        if (config.strategy().reshardsAfterForward() && !(last && u.isRoot())) {
            u.reshard();
        }
    }

    @Override
    public void preBackward(Unit unit, boolean readsParams) {
        ShardedUnit u = units.get(unit.index());
        if (readsParams) {
            unshard(u, "backward");
        }
        unit.bindGrads(u.layout.views(u.beginGradAccumulation()));
        if (!readsParams) {
            return;
        }
        List<ShardedUnit> backwardOrder = new ArrayList<>(postForwardOrder);
        Collections.reverse(backwardOrder);
        int at = backwardOrder.indexOf(u);
        // under ROOT_GRAD_SPLIT the next unit's params may only arrive once the gradient in flight is freed
        CompletableFuture<Void> after = plan.prefetchWaitsForReduction() && !reductions.isEmpty()
                ? reductions.get(reductions.size() - 1) : null;
        for (int k = 1; at >= 0 && k <= config.prefetchDepth() && at + k < backwardOrder.size(); k++) {
            prefetch(backwardOrder.get(at + k), after);
        }
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
            if (!reductions.isEmpty()) {   // one reduction in flight at a time bounds the unsharded gradients
                await(reductions.get(reductions.size() - 1), "gradient reduction");
            }
            CompletableFuture<Runnable> scattered = reduceStream.submit(() -> {
                try {
                    return reducer.reduce(u, grad, accumulate);
                } catch (CommException e) {
                    throw new CommException("unit " + u.unit.name() + ", gradient reduction: " + e.getMessage(), e);
                }
            });
            reductions.add(scattered.thenApply(phase -> null));
            if (reducer.hasAllReducePhase(u)) {   // queued now, so every rank queues all-reduces in the same order
                allReductions.add(allReduceStream.submit(() -> {
                    Runnable phase = await(scattered, "unit " + u.unit.name() + ": reduce-scatter before the all-reduce");
                    try {
                        phase.run();
                        return null;
                    } catch (CommException e) {
                        throw new CommException("unit " + u.unit.name() + ", gradient all-reduce across replicas: "
                                + e.getMessage(), e);
                    }
                }));
            }
        }
    }

    /** Makes u's parameters gathered and bound, waiting for a prefetch or gathering now. */
    private void unshard(ShardedUnit u, String pass) {
        if (u.state == ShardedUnit.ShardState.UNSHARDED) {
            return;
        }
        if (u.pendingGather == null) {
            issueGather(u, null);
        }
        Tensor gathered = await(u.pendingGather, "unit " + u.unit.name() + ": all-gather for " + pass);
        u.pendingGather = null;
        u.gathered = gathered;
        u.state = ShardedUnit.ShardState.UNSHARDED;
        u.unit.bindParams(u.layout.views(gathered));
    }

    /** Issues u's all-gather ahead of its use, unless it is gathered or on its way. */
    private void prefetch(ShardedUnit u, CompletableFuture<Void> after) {
        if (u.state == ShardedUnit.ShardState.SHARDED && u.pendingGather == null) {
            issueGather(u, after);
        }
    }

    /** Queues u's all-gather on the gather stream; it allocates its buffer only once {@code after} (if any) is done. */
    private void issueGather(ShardedUnit u, CompletableFuture<Void> after) {
        u.pendingGather = gatherStream.submit(() -> {
            if (after != null) {
                await(after, "gradient reduction before the all-gather of unit " + u.unit.name());
            }
            Tensor out = device.allocate(u.layout.paramDtype(), MemoryCategory.GATHERED, u.layout.numel());
            try {
                mesh.shard().allGather(u.gatherInput, out).await();
                return out;
            } catch (RuntimeException e) {
                out.close();
                throw e;
            }
        });
    }

    /** Waits for stream work; a failure is rethrown in this thread with {@code what} in front. */
    private static <T> T await(CompletableFuture<T> f, String what) {
        try {
            return f.get();
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof CommException) {
                throw new CommException(what + ": " + c.getMessage(), c);
            }
            throw new IllegalStateException(what + " failed: " + c, c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(what + ": interrupted", e);
        }
    }

    // ------------------------------------------------------------------ teardown

    /** Stops the streams (queued work fails fast once the group is aborted) and frees every buffer. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        closeStreams();
        model.close();
        units.forEach(ShardedUnit::close);
        reduceGroup.close();
    }

    private void closeStreams() {
        gatherStream.close();
        reduceStream.close();
        allReduceStream.close();
    }
}
