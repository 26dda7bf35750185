// The collectives of whichever communicator the ranks of a RankGroup talk through (the
// in-process group, TCP between processes, NCCL between GPUs), measured as nccl-tests does:
// for each operation and each size, warm-up calls, then timed calls issued back to back and one
// synchronisation, the time per call averaged over the ranks; algbw = size / time and
// busbw = algbw × (N−1)/N (all-gather, reduce-scatter) or × 2(N−1)/N (all-reduce), GB = 1e9
// bytes; then one call on a known pattern whose every element is checked (#wrong, summed over
// ranks). "size" is the whole buffer (all-gather's output, reduce-scatter's input), as in
// nccl-tests. The pattern's values are small integers, whose sums are exact in every dtype up
// to a few dozen ranks, so #wrong counts real corruption, not rounding.
package org.fsdp4j.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.comm.CommOp;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.LocalLauncher;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.comm.Reduction;

public final class CollectivesBenchmark {

    /** The pattern repeats every PERIOD elements; host copies go in blocks of a multiple of it. */
    private static final int PERIOD = 13;
    private static final int BLOCK = PERIOD * 80_660;        // ≈ 1M elements per host copy
    /** Timed calls per size shrink so that each size moves at most about this much per rank. */
    private static final long BYTES_PER_SIZE = 2L << 30;

    /**
     * What to run.
     *
     * @param ops        the collectives, in order
     * @param minBytes   the smallest whole-buffer size (a power of two)
     * @param maxBytes   the largest
     * @param dtype      what travels
     * @param warmup     untimed calls per size
     * @param iterations timed calls per size (fewer for large sizes, so each moves at most 2 GiB)
     */
    public record Options(List<CommOp> ops, long minBytes, long maxBytes, DType dtype, int warmup, int iterations) {
        public Options {
            ops = List.copyOf(ops);
            for (CommOp op : ops) {
                if (op != CommOp.ALL_GATHER && op != CommOp.REDUCE_SCATTER && op != CommOp.ALL_REDUCE) {
                    throw new IllegalArgumentException("bench collectives times all-gather, reduce-scatter and all-reduce,"
                            + " not " + op.label());
                }
            }
            if (minBytes < 1 || maxBytes < minBytes || maxBytes > (1L << 30)) {
                throw new IllegalArgumentException("sizes must satisfy 1 <= --min-bytes <= --max-bytes <= 1 GiB, got "
                        + minBytes + " and " + maxBytes);
            }
            if (!dtype.isFloating()) {
                throw new IllegalArgumentException("collectives move floating dtypes, not " + dtype);
            }
            if (warmup < 0 || iterations < 1 || iterations > 100_000) {
                throw new IllegalArgumentException("--warmup must be >= 0 and --iters between 1 and 100000, got "
                        + warmup + " and " + iterations);
            }
        }
    }

    /**
     * One line of the table.
     *
     * @param op         allGather, reduceScatter or allReduce
     * @param sizeBytes  the whole buffer
     * @param count      its elements
     * @param type       the dtype
     * @param redop      "sum", or "none" for all-gather
     * @param iterations the timed calls
     * @param timeUs     time per call, averaged over the ranks
     * @param algbwGBs   size / time, GB = 1e9 bytes
     * @param busbwGBs   algbw × the op's bus factor
     * @param wrong      elements that differed from the expected result, summed over ranks
     */
    public record Row(String op, long sizeBytes, long count, String type, String redop, int iterations, double timeUs,
                      double algbwGBs, double busbwGBs, long wrong) {
    }

    private CollectivesBenchmark() {
    }

    /**
     * Runs {@code options} on every rank of {@code group} that lives in this process (rank
     * group.firstRank() + l with a backend on {@code localDevices.get(l)}, {@code cpuThreads}
     * threads) and returns the rows, which rank {@code group.firstRank()} also hands to {@code
     * onRow} as each completes.
     */
    public static List<Row> run(RankGroup group, List<Device> localDevices, int cpuThreads, Options options,
                                Consumer<Row> onRow) {
        List<List<Row>> all = LocalLauncher.run(group, rank -> {
            try (Backend backend = Backends.create(localDevices.get(rank - group.firstRank()), new MemoryTracker("rank " + rank),
                    new BackendOptions(cpuThreads, false));
                 Communicator comm = group.communicator(rank, backend)) {
                List<Row> rows = new ArrayList<>();
                for (CommOp op : options.ops()) {
                    for (long size = options.minBytes(); size <= options.maxBytes(); size *= 2) {
                        Row row = measure(op, size, options, backend, comm);
                        if (row != null) {
                            rows.add(row);
                            if (rank == group.firstRank()) {
                                onRow.accept(row);
                            }
                        }
                    }
                }
                return rows;
            }
        });
        return all.get(0);
    }

    /** One size of one op on one rank; null when the size holds less than one element per rank. */
    private static Row measure(CommOp op, long sizeBytes, Options o, Backend backend, Communicator comm) {
        int n = comm.size();
        DType dtype = o.dtype();
        long count = sizeBytes / dtype.byteSize() / n * n;      // a whole number of elements per rank
        if (count < n) {
            return null;
        }
        long chunk = count / n;
        Backend.Stream stream = backend.computeStream();
        int iterations = (int) Math.max(2, Math.min(o.iterations(), BYTES_PER_SIZE / (count * dtype.byteSize())));
        int warmup = Math.min(o.warmup(), iterations);
        try (Tensor full = backend.allocate(dtype, MemoryCategory.WORKSPACE, count);
             Tensor part = backend.allocate(dtype, MemoryCategory.WORKSPACE, chunk);
             Tensor stat = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 2)) {
            fillPattern(backend, op == CommOp.ALL_GATHER ? part : full, comm.rank());
            for (int i = 0; i < warmup; i++) {
                call(op, comm, full, part, stream);
            }
            stream.synchronize();
            long start = System.nanoTime();
            for (int i = 0; i < iterations; i++) {
                call(op, comm, full, part, stream);
            }
            stream.synchronize();
            double timeUs = (System.nanoTime() - start) / 1e3 / iterations;
            // the check: a fresh pattern, one call, every element compared on the host
            fillPattern(backend, op == CommOp.ALL_GATHER ? part : full, comm.rank());
            call(op, comm, full, part, stream);
            long wrong = countWrong(op, backend, op == CommOp.REDUCE_SCATTER ? part : full, comm.rank(), n, dtype, chunk);
            backend.copyFromHost(new float[] {(float) timeUs, wrong}, 0, stat);
            comm.allReduce(stat, Reduction.SUM, stream);
            float[] sums = backend.toHost(stat);
            double avgUs = sums[0] / n;
            double algbw = count * dtype.byteSize() / (avgUs * 1e-6) / 1e9;
            double factor = op == CommOp.ALL_REDUCE ? 2.0 * (n - 1) / n : (double) (n - 1) / n;
            return new Row(op.label(), count * dtype.byteSize(), count, dtype.shortName(),
                    op == CommOp.ALL_GATHER ? "none" : "sum", iterations, avgUs, algbw, algbw * factor, (long) sums[1]);
        }
    }

    private static void call(CommOp op, Communicator comm, Tensor full, Tensor part, Backend.Stream stream) {
        switch (op) {
            case ALL_GATHER -> comm.allGather(part, full, stream);
            case REDUCE_SCATTER -> comm.reduceScatter(full, part, Reduction.SUM, stream);
            case ALL_REDUCE -> comm.allReduce(full, Reduction.SUM, stream);
            default -> throw new IllegalStateException(op.label());
        }
    }

    /** Rank r's value at element i: a small integer, exact in every float dtype and in sums of a few dozen. */
    private static float value(int rank, long i) {
        return rank % 7 + 1 + (float) (i % PERIOD);
    }

    /** Σ over ranks of value(r, i). */
    private static float sumOverRanks(int ranks, long i) {
        float s = 0;
        for (int r = 0; r < ranks; r++) {
            s += value(r, i);
        }
        return s;
    }

    private static void fillPattern(Backend backend, Tensor t, int rank) {
        float[] block = new float[(int) Math.min(BLOCK, t.numel())];
        for (int i = 0; i < block.length; i++) {
            block[i] = value(rank, i);
        }
        for (long at = 0; at < t.numel(); at += BLOCK) {
            long len = Math.min(BLOCK, t.numel() - at);
            backend.copyFromHost(block, 0, t.view(at, len));
        }
    }

    /** Elements of {@code out} that differ from what the collective should have produced on this rank. */
    private static long countWrong(CommOp op, Backend backend, Tensor out, int rank, int n, DType dtype, long chunk) {
        float[] host = new float[(int) Math.min(BLOCK, out.numel())];
        long wrong = 0;
        for (long at = 0; at < out.numel(); at += BLOCK) {
            int len = (int) Math.min(BLOCK, out.numel() - at);
            backend.copyToHost(out.view(at, len), host, 0);
            for (int i = 0; i < len; i++) {
                long e = at + i;
                float expected = switch (op) {
                    case ALL_GATHER -> value((int) (e / chunk), e % chunk);           // chunk q is rank q's input
                    case REDUCE_SCATTER -> sumOverRanks(n, rank * chunk + e);
                    default -> sumOverRanks(n, e);
                };
                if (host[i] != dtype.round(expected)) {
                    wrong++;
                }
            }
        }
        return wrong;
    }
}
