// N in-process FSDP ranks that live across steps: each rank owns a backend (a CPU backend with
// cores/N threads, so the ranks share the cores without oversubscribing them; or a GPU, which
// several ranks may share), its own memory tracker, a model built by the caller's factory, its
// mesh and its engine, and one thread that runs the rank's part of every step (RankThreads: kept
// across steps, with what the thread holds; the first failure aborts the group, so every rank
// stops with an error naming the failed one). One rank is the same engine
// at N = 1: the trainer and the tests both drive this for every run.
package org.fsdp4j.fsdp;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ModelContext;
import org.fsdp4j.api.ModelFactory;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.api.TrainableModel;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.DeviceMesh;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.comm.RankGroups;
import org.fsdp4j.comm.RankThreads;
import org.fsdp4j.optim.Optimizer;

public final class LocalFsdpGroup implements AutoCloseable {

    /** Something to run on every rank's thread with its engine (tests read shards this way). */
    @FunctionalInterface
    public interface RankTask<T> {
        T run(int rank, FsdpEngine engine);
    }

    /** Everything one rank owns, closed in reverse order of creation. */
    private static final class Rank implements AutoCloseable {
        final MemoryTracker deviceMemory;
        final MemoryTracker hostMemory;      // = deviceMemory unless offloading
        final Backend device;
        final Backend host;                  // = device unless offloading
        final Communicator world;
        final DeviceMesh mesh;
        final FsdpEngine engine;
        private final List<AutoCloseable> made;

        Rank(int rank, RankGroup group, FsdpOptions config, ModelFactory models, Optimizer optimizer,
             ParamSource initialValues, Device deviceKind, BackendOptions options, UnaryOperator<Communicator> link) {
            List<AutoCloseable> made = new ArrayList<>();
            try {
                deviceMemory = new MemoryTracker("rank " + rank);
                device = add(made, Backends.create(deviceKind, deviceMemory, options));
                if (config.offload()) {
                    hostMemory = new MemoryTracker("rank " + rank + " host");
                    host = add(made, Backends.createHost(deviceKind, hostMemory, options));
                } else {
                    hostMemory = deviceMemory;
                    host = device;
                }
                world = add(made, link.apply(group.communicator(rank, device)));
                mesh = add(made, DeviceMesh.create(world, config.shardSize()));
                TrainableModel model = models.create(new ModelContext(device, rank, config.worldSize(),
                        config.precision().paramDtype(), config.activationCheckpointing()));
                engine = new FsdpEngine(model, device, mesh, config, optimizer, host, initialValues);
                made.add(engine);
                this.made = made;
            } catch (RuntimeException e) {
                closeAll(made);
                throw e;
            }
        }

        private static <T extends AutoCloseable> T add(List<AutoCloseable> made, T t) {
            made.add(t);
            return t;
        }

        private static void closeAll(List<AutoCloseable> made) {
            RuntimeException first = null;
            for (int i = made.size() - 1; i >= 0; i--) {
                try {
                    made.get(i).close();
                } catch (Exception e) {
                    if (first == null) {
                        first = e instanceof RuntimeException re ? re : new IllegalStateException(e);
                    }
                }
            }
            if (first != null) {
                throw first;
            }
        }

        @Override
        public void close() {
            closeAll(made);
        }
    }

    private final FsdpOptions config;
    private final RankGroup group;
    private final RankThreads threads;
    private final List<Rank> ranks;
    private boolean closed;

    /**
     * Starts {@code config.worldSize()} ranks on {@code device}, each rank's backend built with
     * {@code perRank}. {@code link} wraps each rank's world communicator (identity, or a
     * LatencyCommunicator).
     */
    public LocalFsdpGroup(FsdpOptions config, ModelFactory models, Optimizer optimizer, long seed,
                          Device device, BackendOptions perRank, UnaryOperator<Communicator> link) {
        this(config, models, optimizer, seed, Collections.nCopies(config.worldSize(), device),
                perRank, link);
    }

    /** As above with rank r on {@code devices.get(r)}; the ranks talk as RankGroups picks from where they sit. */
    public LocalFsdpGroup(FsdpOptions config, ModelFactory models, Optimizer optimizer, long seed,
                          List<Device> devices, BackendOptions perRank, UnaryOperator<Communicator> link) {
        this(config, models, optimizer, seed, devices, perRank, link,
                RankGroups.forDevices(devices, config.collectiveTimeout()));
    }

    /**
     * As above, every rank on {@code device} with an in-process group that runs its collectives
     * as {@code dispatch} says (tests run CPU ranks both ways).
     */
    public LocalFsdpGroup(FsdpOptions config, ModelFactory models, Optimizer optimizer, long seed,
                          Device device, BackendOptions perRank, UnaryOperator<Communicator> link,
                          LocalGroup.Dispatch dispatch) {
        this(config, models, optimizer, seed, Collections.nCopies(config.worldSize(), device),
                perRank, link, new LocalGroup(config.worldSize(), config.collectiveTimeout(), dispatch));
    }

    /** As above, the ranks talking through {@code group} (NCCL, or an in-process group made by the caller). */
    public LocalFsdpGroup(FsdpOptions config, ModelFactory models, Optimizer optimizer, long seed,
                          List<Device> devices, BackendOptions perRank, UnaryOperator<Communicator> link,
                          RankGroup group) {
        this(config, models, optimizer, ParamSource.seeded(seed), devices, perRank, link, group);
    }

    /**
     * As above, the parameters starting from {@code initialValues} instead of the seed's ParamInit
     * values (pretrained weights: each rank reads only the elements its shards hold).
     */
    public LocalFsdpGroup(FsdpOptions config, ModelFactory models, Optimizer optimizer, ParamSource initialValues,
                          List<Device> devices, BackendOptions perRank, UnaryOperator<Communicator> link,
                          RankGroup group) {
        if (devices.size() != config.worldSize() || group.worldSize() != config.worldSize()) {
            throw new IllegalArgumentException(config.worldSize() + " ranks, but " + devices.size()
                    + " devices and a group of " + group.worldSize());
        }
        this.config = config;
        this.group = group;
        Rank[] made = new Rank[group.size()];     // the ranks of this process: group.firstRank() onwards
        this.threads = new RankThreads(group);
        try {
            threads.run(r -> made[r - group.firstRank()] = new Rank(r, group, config, models, optimizer,
                    initialValues, devices.get(r), perRank, link));
        } catch (RuntimeException e) {
            for (Rank r : made) {
                if (r != null) {
                    r.close();
                }
            }
            threads.close();
            throw e;
        }
        this.ranks = List.of(made);
    }

    /**
     * One step on a global batch: rank r trains on samples [r·B/N, (r+1)·B/N), split into its
     * micro-batches in order, each uploaded to the rank's device as the model's Inputs. Returns the
     * step as the API reports it: rank 0's loss, norm and scale (every rank has the same), the
     * most host synchronisations of a rank, the promoted GEMMs of all ranks and each rank's bytes
     * sent, over the ranks this process runs (all of them unless the group spans processes).
     */
    public StepMetrics step(Batch batch, float lr) {
        List<StepMetrics> results = stepEachRank(batch, lr);
        long[] sent = new long[results.size()];
        long hostSyncs = 0;
        long promoted = 0;
        for (int r = 0; r < results.size(); r++) {
            sent[r] = results.get(r).sentBytesPerRank()[0];
            hostSyncs = Math.max(hostSyncs, results.get(r).hostSyncs());
            promoted += results.get(r).promotedCopies();
        }
        StepMetrics r0 = results.get(0);
        return new StepMetrics(r0.loss(), r0.gradNorm(), r0.skipped(), r0.lossScale(), hostSyncs, promoted, sent);
    }

    /** As {@link #step}, each rank's own metrics in rank order (the engine's tests check every rank). */
    public List<StepMetrics> stepEachRank(Batch batch, float lr) {
        return onEachRanksSlice(batch, (engine, inputs) -> engine.step(inputs, lr));
    }

    /**
     * The mean loss over the global batch, forward only (FsdpEngine.evaluate): every rank runs
     * its slice [r·B/N, (r+1)·B/N), split into its micro-batches as a step splits it, and the
     * ranks' losses are summed with one all-reduce, so every rank returns the same value (rank 0's).
     */
    public float evaluate(Batch batch) {
        return onEachRanksSlice(batch, FsdpEngine::evaluate).get(0);
    }

    /** What each rank's engine makes of its share of {@code batch}, uploaded as its micro-batches' Inputs. */
    private <T> List<T> onEachRanksSlice(Batch batch, java.util.function.BiFunction<FsdpEngine, List<Inputs>, T> work) {
        if (closed) {
            throw new IllegalStateException("the FSDP group is closed");
        }
        config.checkBatch(batch.samples());
        int m = config.microBatches();
        int perMicroBatch = batch.samples() / config.worldSize() / m;
        List<T> results = threads.run(r -> {
            Rank rank = ranks.get(r - group.firstRank());
            List<Inputs> inputs = new ArrayList<>(m);
            try {
                for (int i = 0; i < m; i++) {
                    inputs.add(BatchUpload.rows(rank.device, batch, (r * m + i) * perMicroBatch, perMicroBatch));
                }
                return work.apply(rank.engine, inputs);
            } finally {
                inputs.forEach(BatchUpload::free);   // stream-ordered: the step's queued reads finish first
            }
        });
        CommException aborted = group.abortCause();
        if (aborted != null) {
            // NCCL lets a stream go on past a collective it aborted: the step's figures are not to be trusted
            throw new CommException(aborted.getMessage(), aborted);
        }
        return results;
    }

    /** Runs {@code task} on every rank's thread (as a step does) and returns the results in rank order. */
    public <T> List<T> onEachRank(RankTask<T> task) {
        return threads.run(r -> task.run(r, ranks.get(r - group.firstRank()).engine));
    }

    /** Each rank's device tracker, in rank order (the ranks of this process). */
    public List<MemoryTracker> deviceMemory() {
        return ranks.stream().map(r -> r.deviceMemory).toList();
    }

    /** Each rank's host tracker (where offloaded state lives; the device tracker when not offloading). */
    public List<MemoryTracker> hostMemory() {
        return ranks.stream().map(r -> r.hostMemory).toList();
    }

    /** P′: parameters plus alignment and shard padding (the same on every rank). */
    public long paddedParams() {
        return ranks.get(0).engine.paddedParams();
    }

    /** The engines' unit buffer plan (the same on every rank). */
    public UnitBufferPlan plan() {
        return ranks.get(0).engine.plan();
    }

    public String backendName() {
        return ranks.get(0).device.name();
    }

    /** The dense GEMM peak of one rank's device for {@code operands} (TFLOP/s), where the backend knows it. */
    public java.util.OptionalDouble peakTflops(DType operands) {
        return ranks.get(0).device.peakTflops(operands);
    }

    /** Closes every rank's engine, communicators and backends. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        RuntimeException first = null;
        for (Rank r : ranks) {
            try {
                r.close();
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
        }
        threads.close();
        if (first != null) {
            throw first;
        }
    }
}
