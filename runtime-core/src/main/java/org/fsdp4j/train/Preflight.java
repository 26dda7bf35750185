// The checks a run makes before its first step allocates anything: will the step fit in the
// memory the device has left (every in-process CPU rank shares the host's RAM; the ranks placed
// on one GPU share it: one with --device cuda, all of them with --device cuda:i), with what the
// backend keeps for itself (cuBLAS's workspace), is no single buffer over the CPU backend's 2 GiB
// limit, and about how long will a step take. A run that does not fit gets the figures and the
// flags that would make it fit. The memory figures come from a StepCostModel (the planner).
// In a run over several processes each process checks its own host (Placement): the host's RAM
// holds the ranks of every process of the run on it, each GPU one rank.
package org.fsdp4j.train;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.backend.RankPlacement;
import org.fsdp4j.backend.cpu.CpuStorage;
import org.fsdp4j.metrics.GemmBenchmark;
import org.fsdp4j.plan.StepCost;
import org.fsdp4j.model.ModelConfig;

public final class Preflight {

    /**
     * A measured GEMM of the model's shape runs this much faster than a whole training step does
     * per FLOP (the step adds attention, element-wise ops, the optimizer and communication):
     * measured on the CPU backend for tiny, small and bench-4x256 after the JIT has warmed up.
     */
    static final double STEP_EFFICIENCY = 0.5;

    /**
     * A suggested fix must leave this share of the available memory free: the estimate is off
     * by up to ~15% (PlannerRuntimeTest), and the JVM and the host block cache need room too.
     */
    static final double FIX_HEADROOM = 0.1;

    /**
     * @param cost          the model's estimate for one rank
     * @param sharingRanks  ranks whose memory comes from the same pool (N on the CPU; on a GPU the
     *                      ranks placed on it)
     * @param reservedBytesPerRank what each rank's backend keeps for itself beside the step's tensors
     * @param neededBytes   what those ranks need together at the step's peak (with offloaded state)
     * @param availableBytes what the device has left, as the OS or the driver says (or as the caller limits it)
     * @param memoryKind    "host RAM" or "GPU memory", for messages
     * @param bufferLimitBytes the largest single buffer the backend allows (0: no limit)
     * @param fixes         flag changes that would make a run that does not fit, fit
     * @param stepTimeMs    estimated time of a step once warmed up; empty when not measured
     */
    public record Report(StepCost cost, int sharingRanks, long reservedBytesPerRank, long neededBytes,
                         OptionalLong availableBytes,
                         String memoryKind, long bufferLimitBytes, List<Fix> fixes, OptionalDouble stepTimeMs) {

        /** Whether the needed bytes fit in the available ones (true when the available amount is unknown). */
        public boolean fitsMemory() {
            return availableBytes.isEmpty() || neededBytes <= availableBytes.getAsLong();
        }

        /** Whether some buffer is larger than the backend can allocate in one piece. */
        public boolean bufferTooLarge() {
            return bufferLimitBytes > 0 && cost.largestBufferBytes() > bufferLimitBytes;
        }
    }

    /** A change of flags and what the run would need with it. */
    public record Fix(String flags, long neededBytes) {
    }

    /**
     * Where this process's ranks run: one process of {@code processes} in the run (each holding
     * N / processes consecutive ranks), {@code processesOnHost} of them on this host (they share
     * its RAM), this one the {@code localProcess}-th there.
     */
    public record Placement(int processes, int processesOnHost, int localProcess) {

        /** A run of one process: it holds every rank. */
        public static final Placement ALONE = new Placement(1, 1, 0);

        /** This process's place, from its identity in a run over several. */
        public static Placement of(org.fsdp4j.dist.ProcessIdentity id) {
            return new Placement(id.count(), id.localCount(), id.localRank());
        }

        /** The ranks whose memory comes from this host's RAM in a run of {@code worldSize} ranks (more than one). */
        int ranksOnHost(int worldSize) {
            return processesOnHost * (worldSize / processes);
        }
    }

    private Preflight() {
    }

    /**
     * Estimates {@code config} on {@code device} (already resolved). {@code availableBytes}
     * empty asks the device's provider; {@code measureTime} times a GEMM of the model's shape.
     */
    public static Report check(TrainConfig config, Device device, StepCostModel model, OptionalLong availableBytes,
                               boolean measureTime) {
        return check(config, device, model, availableBytes, measureTime, Placement.ALONE);
    }

    /**
     * As above for the process at {@code placement} in a run over several: its host's RAM, or
     * the GPUs its ranks run on (the one with the least memory available), holds what it needs.
     */
    public static Report check(TrainConfig config, Device device, StepCostModel model, OptionalLong availableBytes,
                               boolean measureTime, Placement placement) {
        boolean cpu = device.isCpu();
        boolean alone = placement.processes() == 1;
        int sharing = cpu ? (config.fsdp().worldSize() > 1 ? placement.ranksOnHost(config.fsdp().worldSize()) : 1)
                : alone ? ranksOn(config, device) : 1;             // across processes each rank has a GPU of its own
        Device checked = cpu || alone ? device : leastFreeGpu(config, device, placement);
        long reserved = Backends.provider(device.kind()).map(p -> p.reservedBytesPerRank(checked)).orElse(0L);
        Pool pool = new Pool(sharing, cpu, reserved, placement);
        OptionalLong available = availableBytes.isPresent() ? availableBytes
                : Backends.provider(device.kind()).map(p -> p.availableMemoryBytes(checked)).orElse(OptionalLong.empty());
        long limit = cpu ? CpuStorage.MAX_BYTES : 0;
        ModelConfig.checkParameterCount(config.model());     // too large anywhere, before too large for the CPU
        if (cpu) {
            checkUnitsFitCpuTensors(config, limit);
        }
        StepCost cost = model.estimate(config, pool.onGpu());
        long needed = pool.needed(cost);
        boolean fits = available.isEmpty() || needed <= available.getAsLong();
        boolean bufferFits = limit == 0 || cost.largestBufferBytes() <= limit;
        OptionalLong target = available.isEmpty() ? available
                : OptionalLong.of((long) (available.getAsLong() * (1 - FIX_HEADROOM)));
        List<Fix> fixes = fits && bufferFits ? List.of() : fixes(config, model, pool, target, limit);
        // a run refused for its memory needs no time, and its GEMM of the model's width might not fit either
        OptionalDouble timeMs = measureTime && fits && bufferFits ? OptionalDouble.of(stepTimeMs(config, device, cost))
                : OptionalDouble.empty();
        return new Report(cost, sharing, reserved, needed, available, cpu ? "host RAM" : "GPU memory", limit, fixes,
                timeMs);
    }

    /**
     * Refuses a CPU run whose unit of parameters (the embeddings, or one block) is larger than one
     * CPU tensor holds: each is gathered into one buffer, so no batch, micro-batching or
     * checkpointing fixes that, only a smaller model.
     */
    private static void checkUnitsFitCpuTensors(TrainConfig config, long limit) {
        ModelConfig m = config.model();
        List<List<ParamSpec>> units = m.unitSpecs();
        long bytesPerParam = config.fsdp().precision().paramDtype().byteSize();
        for (int u = 0; u < Math.min(2, units.size()); u++) {         // the root, then one block (all are alike)
            long params = units.get(u).stream().mapToLong(ParamSpec::numel).sum();
            if (params * bytesPerParam > limit) {
                boolean root = u == 0;
                boolean gpt = m.learnsPositions();         // a GPT's root holds the learned positions too
                throw new IllegalArgumentException(String.format(Locale.ROOT, "%s of this model %s %,d parameters"
                        + " (%.1f GiB in %s), but a CPU tensor holds at most %.0f GiB and each unit of parameters is one:"
                        + " %s, or train on a GPU", root ? "the embeddings" : "each block",
                        root ? "(vocab " + m.vocabSize() + (gpt ? ", context " + m.maxSeqLen() : "") + ", width "
                                + m.embedDim() + ") hold" : "(width " + m.embedDim() + ") holds", params,
                        params * bytesPerParam / (double) (1L << 30), config.fsdp().precision().paramDtype().shortName(),
                        limit / (double) (1L << 30), root ? "lower --vocab" + (gpt ? ", --context" : "") + " or --hidden"
                                : "lower --hidden"));
            }
        }
    }

    /** The ranks whose memory comes from one pool, and what each rank's backend keeps for itself. */
    private record Pool(int sharing, boolean cpu, long reservedPerRank, Placement placement) {
        boolean onGpu() {
            return !cpu;
        }

        long needed(StepCost cost) {
            return sharing * (cost.peakBytesPerRank() + reservedPerRank + (cpu ? cost.hostBytesPerRank() : 0));
        }

        Pool withSharing(int n) {
            return new Pool(n, cpu, reservedPerRank, placement);
        }
    }

    /** Of the GPUs this process's ranks run on (RankPlacement.placeLocal), the one with the least memory available. */
    private static Device leastFreeGpu(TrainConfig config, Device device, Placement placement) {
        List<Device> mine = RankPlacement.placeLocal(config.fsdp().device(), device, config.fsdp().worldSize() / placement.processes(),
                placement.localProcess(), placement.processesOnHost());
        Device least = mine.get(0);
        long leastFree = Long.MAX_VALUE;
        for (Device d : mine) {
            long free = Backends.provider(d.kind()).map(p -> p.availableMemoryBytes(d)).orElse(OptionalLong.empty())
                    .orElse(Long.MAX_VALUE);
            if (free < leastFree) {
                least = d;
                leastFree = free;
            }
        }
        return least;
    }

    /** How many ranks the run places on {@code device}, rank 0's GPU (RankPlacement). */
    private static int ranksOn(TrainConfig config, Device device) {
        return (int) RankPlacement.place(config.fsdp().device(), device, config.fsdp().worldSize()).stream()
                .filter(device::equals).count();
    }

    /**
     * The smallest changes that fit: more micro-batches, activation checkpointing, a smaller
     * batch, and on the CPU (where in-process ranks share the host's memory) fewer ranks.
     */
    private static List<Fix> fixes(TrainConfig config, StepCostModel model, Pool pool, OptionalLong available,
                                   long limit) {
        List<Fix> fixes = new ArrayList<>();
        int perRank = config.batchSize() / config.fsdp().worldSize();
        for (int m = config.fsdp().microBatches() + 1; m <= perRank; m++) {
            if (perRank % m == 0) {
                int passes = m;
                TrainConfig c = config.toBuilder().fsdp(f -> f.microBatches(passes)).build();
                if (fitsWith(c, model, pool, available, limit, fixes, "--micro-batches " + m)) {
                    break;
                }
            }
        }
        if (!config.fsdp().activationCheckpointing()) {
            fitsWith(config.toBuilder().fsdp(f -> f.activationCheckpointing(true)).build(), model, pool, available, limit, fixes,
                    "--checkpoint-activations");
        }
        // the largest batch (a multiple of N·M) that fits: the need grows with the batch
        int unit = config.fsdp().worldSize() * config.fsdp().microBatches();
        int lo = 0;
        int hi = config.batchSize() / unit;
        while (lo < hi) {
            int mid = (lo + hi + 1) >>> 1;
            TrainConfig c = config.toBuilder().batchSize(mid * unit).build();
            if (fits(model.estimate(c, pool.onGpu()), pool, available, limit)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        if (lo > 0 && lo * unit < config.batchSize()) {
            fitsWith(config.toBuilder().batchSize(lo * unit).build(), model, pool, available, limit, fixes,
                    "--batch-size " + lo * unit);
        }
        if (pool.cpu() && config.fsdp().worldSize() > 1) {
            for (int n = config.fsdp().worldSize() - 1; n >= 1; n--) {       // the most ranks that fit
                if (n % pool.placement().processes() != 0) {
                    continue;                   // every process holds as many ranks
                }
                TrainConfig c;
                try {
                    int ranks = n;
                    c = config.toBuilder().fsdp(f -> f.worldSize(ranks)).build();
                } catch (IllegalArgumentException e) {
                    continue;                   // the batch or the shard groups do not split over n ranks
                }
                if (fitsWith(c, model, pool.withSharing(n > 1 ? pool.placement().ranksOnHost(n) : 1), available, limit,
                        fixes, "--world-size " + n)) {
                    break;
                }
            }
        }
        return List.copyOf(fixes);
    }

    private static boolean fitsWith(TrainConfig c, StepCostModel model, Pool pool, OptionalLong available, long limit,
                                    List<Fix> fixes, String flags) {
        StepCost cost = model.estimate(c, pool.onGpu());
        if (!fits(cost, pool, available, limit)) {
            return false;
        }
        fixes.add(new Fix(flags, pool.needed(cost)));
        return true;
    }

    private static boolean fits(StepCost cost, Pool pool, OptionalLong available, long limit) {
        return (available.isEmpty() || pool.needed(cost) <= available.getAsLong())
                && (limit == 0 || cost.largestBufferBytes() <= limit);
    }

    /**
     * A step's time from its FLOPs and the measured rate of a GEMM of the model's shape (the MLP's
     * (B·T) × C by C × 4C product, at most 1024 rows), with all the threads the run's ranks share,
     * timed three times over about 10 ms each, the fastest taken: a machine busy with other work
     * slows some of the probes, and one slowed probe made the estimate many times too long.
     */
    private static double stepTimeMs(TrainConfig config, Device device, StepCost cost) {
        int c = config.model().embedDim();
        int rows = (int) Math.min(1024, config.tokensPerStep());
        DType dtype = config.fsdp().precision().paramDtype();
        try (Backend backend = Backends.create(device, new MemoryTracker("preflight " + device), config.fsdp().cpuThreads())) {
            GemmBenchmark.Result first = GemmBenchmark.run(backend, rows, 4 * c, c, dtype, 1, 1, 1);
            int iters = (int) Math.max(3, Math.min(100, 10e3 / Math.max(1, first.timeUs())));
            double best = 0;
            for (int probe = 0; probe < 3; probe++) {
                best = Math.max(best, GemmBenchmark.run(backend, rows, 4 * c, c, dtype, 1, iters, 1).tflops());
            }
            return cost.flopsPerStep() / (best * 1e12 * STEP_EFFICIENCY) * 1e3;
        }
    }
}
