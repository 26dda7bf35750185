// The ShardedModel Fsdp.shard returns: this process's ranks (LocalFsdpGroup) behind the public
// API, which is the only way anything outside the engine drives them; the command line's
// trainer included. The engine runs on the options as given and reports its steps as the API's
// StepMetrics; the options become AdamW here, and devices are placed here.
package org.fsdp4j.fsdp;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ModelFactory;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.ShardedModel;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.api.ShardingInfo;
import org.fsdp4j.api.StateSource;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.backend.RankPlacement;
import org.fsdp4j.comm.LocalLauncher;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.comm.RankGroups;
import org.fsdp4j.dist.FaultPoint;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.optim.AdamW;

public final class LocalShardedModel implements ShardedModel {

    private final FsdpOptions options;
    private final LocalFsdpGroup group;
    private final ShardingInfo info;
    private final List<ParamSpec> params;      // every parameter, in model order

    private LocalShardedModel(ModelFactory factory, FsdpOptions options, Device device, RankGroup ranks,
                              List<Device> devices, int ranksOnThisMachine) {
        this.options = options;
        int n = options.worldSize();
        int here = ranks.size();
        int threadsPerRank = options.cpuThreads() == 0 ? BackendOptions.threadsPerRank(ranksOnThisMachine)
                : Math.max(1, options.cpuThreads() / here);
        AdamW adamW = new AdamW(options.lr(), options.beta1(), options.beta2(), options.eps(), options.weightDecay());
        this.group = startRanks(options, factory, adamW, options.initialValues(), devices, new BackendOptions(threadsPerRank, options.debugStreams()),
                ranks);
        try {
            this.params = checkSameModel(group.onEachRank((rank, engine) -> engine.layouts()));
            long count = params.stream().mapToLong(ParamSpec::numel).sum();
            UnitBufferPlan plan = group.plan();
            List<Device> mine = devices.subList(ranks.firstRank(), ranks.firstRank() + here);
            this.info = new ShardingInfo(options, device, n, ranks.firstRank(), here, count, group.paddedParams(),
                    backendName(group.backendName(), mine)
                            + (ranks.transport() == null ? "" : "; " + ranks.transport()), group.peakTflops(options.precision().paramDtype()),
                    Optional.of(new ShardingInfo.GatherSchedule(plan.schedule().cliName(), plan.budgetBytes(),
                            plan.peakBytes(), plan.keptPeakBytes(), plan.inPlace())));
        } catch (RuntimeException e) {
            group.close();
            throw e;
        }
    }

    /**
     * The ranks, each building its model and shard. A rank that refuses a value (its model, or initial
     * values that do not fit the model) fails the call with that IllegalArgumentException's message,
     * as Fsdp.shard documents, rather than as a failed rank.
     */
    private static LocalFsdpGroup startRanks(FsdpOptions config, ModelFactory models, AdamW adamW,
                                             ParamSource initialValues, List<Device> devices, BackendOptions perRank,
                                             RankGroup ranks) {
        try {
            return new LocalFsdpGroup(config, models, adamW, initialValues, devices, perRank, UnaryOperator.identity(),
                    ranks);
        } catch (LocalLauncher.RanksFailedException e) {
            if (e.getCause() instanceof IllegalArgumentException bad && bad.getMessage() != null) {
                throw new IllegalArgumentException(bad.getMessage(), e);
            }
            throw e;
        }
    }

    /** Rank 0's backend in words, and where the other ranks run when they are not on the same device. */
    private static String backendName(String first, List<Device> devices) {
        if (devices.size() == 1) {
            return first;
        }
        return first + (devices.stream().distinct().count() == 1 ? " per rank"
                : " and one rank on each of " + devices.subList(1, devices.size()).stream().map(Device::toString)
                        .collect(java.util.stream.Collectors.joining(", ")));
    }

    /** Every rank of {@code options} in this process (Fsdp.shard). */
    public static LocalShardedModel start(ModelFactory factory, FsdpOptions options) {
        Device device = Backends.resolve(options.device(), line -> { });
        List<Device> devices = RankPlacement.place(options.device(), device, options.worldSize());
        RankGroup ranks = RankGroups.forDevices(devices, options.collectiveTimeout());
        return new LocalShardedModel(factory, options, device, ranks, devices, options.worldSize());
    }

    /**
     * This process's share of a run over several processes ({@code processes}): its K = N / P
     * ranks, placed on this node's devices (RankPlacement.placeLocal), which reach the others
     * over TCP (CPU) or NCCL (GPUs); {@code ranksOnThisMachine} share the machine's cores.
     * {@code log} hears how the device was resolved.
     */
    public static LocalShardedModel start(ModelFactory factory, FsdpOptions options, ProcessGroup processes,
                                          int ranksOnThisMachine, Consumer<String> log) {
        Device device = Backends.resolve(options.device(), log);
        int p = processes.processCount();
        if (options.worldSize() % p != 0) {
            throw new IllegalArgumentException("--world-size " + options.worldSize() + " does not split over " + p
                    + " processes: use a multiple of " + p + " (each process runs the same number of ranks)");
        }
        int k = options.worldSize() / p;
        List<Device> local = RankPlacement.placeLocal(options.device(), device, k, processes.identity().localRank(),
                processes.identity().localCount());
        FaultPoint.reach(FaultPoint.BEFORE_RANKS_CONNECT, processes.process());
        RankGroup ranks = processes.ranks(options.worldSize(), options.collectiveTimeout(), local);
        List<Device> devices = new ArrayList<>(Collections.nCopies(options.worldSize(), local.get(0)));
        for (int l = 0; l < k; l++) {
            devices.set(ranks.firstRank() + l, local.get(l));      // the other processes' ranks are theirs to place
        }
        return new LocalShardedModel(factory, options, device, ranks, devices, ranksOnThisMachine);
    }

    /** Rank 0's parameter specs, after checking that every rank's model declared the same. */
    private static List<ParamSpec> checkSameModel(List<List<FlatParamLayout>> perRank) {
        List<List<ParamSpec>> specs = new ArrayList<>();
        for (List<FlatParamLayout> layouts : perRank) {
            List<ParamSpec> all = new ArrayList<>();
            layouts.forEach(l -> all.addAll(l.params()));
            specs.add(all);
        }
        for (int r = 1; r < specs.size(); r++) {
            if (!specs.get(r).equals(specs.get(0))) {
                throw new IllegalArgumentException("the model factory built a different model on rank " + r
                        + " than on rank 0 (" + specs.get(r) + " vs " + specs.get(0)
                        + "): every rank must declare the same units and parameters");
            }
        }
        return List.copyOf(specs.get(0));
    }

    @Override
    public StepMetrics step(Batch batch, float lr) {
        return group.step(batch, lr);
    }

    @Override
    public float evaluate(Batch batch) {
        return group.evaluate(batch);
    }

    @Override
    public Map<String, float[]> stateDict() {
        ShardedStateDict state = shardedStateDict();
        Map<String, float[]> out = new LinkedHashMap<>();
        for (ParamSpec p : params) {
            out.put(p.name(), state.full(p.name(), ShardedStateDict.PARAM));
        }
        return out;
    }

    @Override
    public void loadStateDict(Map<String, float[]> values) {
        Map<String, ParamSpec> byName = new LinkedHashMap<>();
        params.forEach(p -> byName.put(p.name(), p));
        for (String name : values.keySet()) {
            if (!byName.containsKey(name)) {
                throw new IllegalArgumentException("the state dict has '" + name + "', which the model does not: its"
                        + " parameters are " + byName.keySet());
            }
        }
        for (ParamSpec p : params) {
            float[] v = values.get(p.name());
            if (v == null) {
                throw new IllegalArgumentException("the state dict has no '" + p.name() + "' " + shape(p));
            }
            if (v.length != p.numel()) {
                throw new IllegalArgumentException("'" + p.name() + "' has " + v.length + " values in the state dict;"
                        + " the model's is " + shape(p) + " = " + p.numel());
            }
        }
        StateSource source = (param, buffer, start, out, offset, count) -> {
            if (buffer.equals(ShardedStateDict.PARAM)) {
                System.arraycopy(values.get(param), Math.toIntExact(start), out, offset, count);
            }   // the optimizer's moments start at zero: out is zero-filled
        };
        loadShardedStateDict(source, new ShardedStateDict.Progress(0,
                options.precision().needsLossScaling() ? options.initialLossScale() : 1f, 0));
    }

    private static String shape(ParamSpec p) {
        return java.util.Arrays.toString(p.shape());
    }

    @Override
    public ShardedStateDict shardedStateDict() {
        List<ShardedStateDict.RankShard> shards = group.onEachRank((rank, engine) -> engine.copyStateToHost());
        List<ShardedStateDict.Progress> progress = group.onEachRank((rank, engine) -> engine.progress());
        List<List<String>> names = group.onEachRank((rank, engine) -> engine.stateBufferNames());
        return new ShardedStateDict(names.get(0), progress.get(0), shards);
    }

    @Override
    public void loadShardedStateDict(StateSource source, ShardedStateDict.Progress progress) {
        group.onEachRank((rank, engine) -> {
            engine.loadState(source, progress);
            return null;
        });
    }

    @Override
    public ShardingInfo info() {
        return info;
    }

    @Override
    public List<MemoryTracker> deviceMemory() {
        return group.deviceMemory();
    }

    @Override
    public List<MemoryTracker> hostMemory() {
        return options.offload() ? group.hostMemory() : Collections.emptyList();
    }

    /** The group of ranks (for the engine's own tests, which inspect shards). */
    public LocalFsdpGroup group() {
        return group;
    }

    @Override
    public void close() {
        group.close();
    }

    @Override
    public String toString() {
        return "ShardedModel[" + info.worldSize() + " ranks on " + info.device() + ", " + info.parameterCount()
                + " parameters, " + options.strategy().cliName() + "]";
    }
}
