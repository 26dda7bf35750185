// `fsdp4j bench collectives`: the nccl-tests table (size, count, type, redop, time, algbw, busbw,
// #wrong) of all-gather, reduce-scatter and all-reduce from 1 KiB to 256 MiB, over whichever
// communicator the ranks use: alone, --world-size N ranks of this process (the in-process group;
// one per GPU with --device cuda: NCCL); as one process of several (fsdp4j launch, or torchrun's,
// Slurm's or Open MPI's variables), TCP between the processes on the CPU and NCCL between their
// GPUs (how a user checks a cluster's links before training). Writes collectives.json with --out;
// exits 8 when any element came out wrong.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.RankPlacement;
import org.fsdp4j.bench.CollectivesBenchmark;
import org.fsdp4j.comm.CommOp;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.comm.RankGroups;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "collectives", mixinStandardHelpOptions = true,
        description = "Time all-gather, reduce-scatter and all-reduce from 1 KiB to 256 MiB (nccl-tests' table), with a"
                + " check of every element, over the communicator in use.")
final class CollectivesBenchCommand implements Callable<Integer> {

    static final String REPORT_FILE = "collectives.json";

    @Spec
    CommandSpec spec;

    @Mixin
    DistOptions dist;

    @Option(names = "--world-size", paramLabel = "N",
            description = "ranks in all: threads of this process when it runs alone (default 2), else spread over the"
                    + " processes (default: one per process)")
    Integer worldSize;

    @Option(names = "--device", paramLabel = "cpu|cuda", defaultValue = "cpu",
            description = "cpu, or cuda for one rank per GPU (NCCL) (default: ${DEFAULT-VALUE})")
    String device;

    @Option(names = "--ops", split = ",", paramLabel = "OP", defaultValue = "allGather,reduceScatter,allReduce",
            description = "collectives to time (default: ${DEFAULT-VALUE})")
    List<String> ops;

    @Option(names = "--min-bytes", paramLabel = "SIZE", defaultValue = "1KiB", converter = TrainCommand.ByteSize.class,
            description = "smallest buffer (default: ${DEFAULT-VALUE})")
    long minBytes;

    @Option(names = "--max-bytes", paramLabel = "SIZE", defaultValue = "256MiB", converter = TrainCommand.ByteSize.class,
            description = "largest buffer; sizes double from the smallest (default: ${DEFAULT-VALUE})")
    long maxBytes;

    @Option(names = "--dtype", defaultValue = "fp32", description = "fp32, bf16 or fp16 (default: ${DEFAULT-VALUE})")
    String dtype;

    @Option(names = "--warmup", defaultValue = "5", description = "untimed calls per size (default: ${DEFAULT-VALUE})")
    int warmup;

    @Option(names = "--iters", defaultValue = "20",
            description = "timed back-to-back calls per size, fewer above 100 MiB so a size moves at most 2 GiB"
                    + " (default: ${DEFAULT-VALUE})")
    int iters;

    @Option(names = "--cpu-threads", defaultValue = "0",
            description = "CPU threads of all the ranks on this machine together, 0 = all cores (default: ${DEFAULT-VALUE})")
    int cpuThreads;

    @Option(names = "--collective-timeout", paramLabel = "SECONDS", defaultValue = "600",
            description = "the watchdog, and how long processes wait for each other at start (default: ${DEFAULT-VALUE})")
    long timeoutSeconds;

    @Option(names = "--out", paramLabel = "DIR", description = "write DIR/" + REPORT_FILE)
    Path outDir;

    /** What every process of a run must agree on (DistOptions.join compares it). */
    record Settings(List<String> ops, long minBytes, long maxBytes, String dtype, int warmup, int iters, int worldSize,
                    String device, long timeoutSeconds) {
    }

    /** The JSON report. */
    record Report(String communicator, int ranks, int processes, String dtype, List<CollectivesBenchmark.Row> rows) {
    }

    @Override
    public Integer call() {
        Optional<ProcessIdentity> identity = dist.identity();
        boolean first = identity.map(id -> id.rank() == 0).orElse(true);
        PrintWriter out = first ? spec.commandLine().getOut() : DistOptions.quiet();
        int n = worldSize != null ? worldSize : identity.map(ProcessIdentity::count).orElse(2);
        List<CommOp> chosen = new ArrayList<>();
        for (String op : ops) {
            chosen.add(parseOp(op));
        }
        DType type = DType.parseFloating(dtype);
        CollectivesBenchmark.Options options = new CollectivesBenchmark.Options(chosen, minBytes, maxBytes, type, warmup,
                iters);
        if (n < 2) {
            throw new IllegalArgumentException("--world-size must be at least 2 (a collective of one moves nothing), got " + n);
        }
        if (timeoutSeconds < 1) {
            throw new IllegalArgumentException("--collective-timeout must be at least 1 second, got " + timeoutSeconds);
        }
        Device d = Device.parse(device.equals("cuda") ? "cuda:0" : device);
        Duration timeout = Duration.ofSeconds(timeoutSeconds);
        try (OutputDir dir = OutputDir.claim(first ? Optional.ofNullable(outDir) : Optional.empty(), "bench collectives",
                REPORT_FILE);
             ProcessGroup processes = identity.isPresent() ? DistOptions.join(identity.get(),
                     new Settings(ops, minBytes, maxBytes, type.shortName(), warmup, iters, n, device, timeoutSeconds),
                     timeout) : null) {
            try {
                return run(out, dir, processes, n, d, options, timeout);
            } catch (RuntimeException | Error e) {
                if (processes != null) {
                    processes.fail(String.valueOf(e.getMessage()));
                }
                throw e;
            }
        }
    }

    private int run(PrintWriter out, OutputDir dir, ProcessGroup processes, int n, Device d,
                    CollectivesBenchmark.Options options, Duration timeout) {
        RankGroup group;
        String communicator;
        int onThisMachine;
        List<Device> local;
        if (processes != null) {
            int k = n / processes.identity().count();
            local = RankPlacement.placeLocal(device, d, k, processes.identity().localRank(),
                    processes.identity().localCount());
            group = processes.ranks(n, timeout, local);
            communicator = (d.isCpu() ? "TCP: " : "NCCL: ") + DistOptions.describe(processes.identity(), n, d)
                    + (d.isCpu() ? "" : ", this process on " + local);
            onThisMachine = group.size() * processes.identity().localCount();
        } else {
            local = new ArrayList<>(Collections.nCopies(n, d));
            if (!d.isCpu() && !device.contains(":")) {
                for (int r = 0; r < n; r++) {
                    local.set(r, Device.cuda(r));
                }
            }
            group = RankGroups.forDevices(local, timeout);
            communicator = (d.isCpu() ? "in-process group: " + n + " ranks as threads of one process"
                    : local.get(0).equals(local.get(n - 1)) ? "GPU " + d + " shared by " + n + " ranks of this process"
                    : "GPUs of this process: " + n + " ranks, one per GPU");
            onThisMachine = n;
        }
        int threads = cpuThreads == 0 ? BackendOptions.threadsPerRank(onThisMachine)
                : Math.max(1, cpuThreads / group.size());
        dir.removeEarlierReports();
        out.println("# fsdp4j bench collectives | " + communicator + " | " + n + " ranks | " + options.dtype().shortName()
                + " | " + options.warmup() + " warm-up, " + options.iterations() + " timed calls per size (fewer for the"
                + " largest) | time = mean per call, averaged over ranks | GB = 1e9 bytes");
        out.println(Format.f("# %12s %12s %6s %6s %6s %12s %12s %12s %8s", "size", "count", "type", "redop", "iters",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"));
        String[] section = {""};
        List<CollectivesBenchmark.Row> rows = CollectivesBenchmark.run(group, local, threads, options, r -> {
            if (!r.op().equals(section[0])) {
                out.println("# " + r.op());
                section[0] = r.op();
            }
            out.println(Format.f("  %12d %12d %6s %6s %6d %12.1f %12.3f %12.3f %8d", r.sizeBytes(), r.count(), r.type(),
                    r.redop(), r.iterations(), r.timeUs(), r.algbwGBs(), r.busbwGBs(), r.wrong()));
            out.flush();
        });
        long wrong = rows.stream().mapToLong(CollectivesBenchmark.Row::wrong).sum();
        out.println(Format.f("# out of bounds values : %d %s", wrong, wrong == 0 ? "OK" : "FAILED"));
        dir.write(REPORT_FILE, new Report(communicator, n, processes == null ? 1 : processes.identity().count(),
                options.dtype().shortName(), rows)).ifPresent(f -> out.println("results: " + f));
        out.flush();
        if (wrong > 0) {
            throw new UserError(ExitCode.WRONG_RESULTS, wrong + " elements came out wrong (see #wrong): the communicator"
                    + " corrupts data");
        }
        return ExitCode.OK.code();
    }

    private static CommOp parseOp(String name) {
        for (CommOp op : List.of(CommOp.ALL_GATHER, CommOp.REDUCE_SCATTER, CommOp.ALL_REDUCE)) {
            if (op.label().equalsIgnoreCase(name.trim()) || op.name().replace("_", "").equalsIgnoreCase(
                    name.trim().replace("-", "").replace("_", ""))) {
                return op;
            }
        }
        throw new IllegalArgumentException("unknown collective '" + name + "': use allGather, reduceScatter or allReduce");
    }
}
