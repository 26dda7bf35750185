// One rank's view of an in-process group. Its stream is a single-thread executor, so calls run
// in issue order and overlap the caller's compute. Each collective is a few rendezvous phases:
// deposit the buffers, let every rank read what it needs from the others (rank r reduces or
// copies only its own part, so the ranks' copies run in parallel like a ring), then a final
// phase so no rank reuses a buffer another is still reading.
package org.fsdp4j.comm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.Tensor;

final class LocalCommunicator implements Communicator {

    /** One issued collective: its sequence number on this communicator and its label for errors. */
    private record Call(long seq, String where) {
    }

    /** What every rank deposits for a collective: the call's signature (checked to match) and its buffer. */
    private record Deposit(String signature, Tensor buffer, int color, int key) {
    }

    private final Rendezvous group;
    private final int rank;
    private final Backend backend;
    private final ExecutorService stream;
    private final CommCounters counters = new CommCounters();
    private final AtomicLong issued = new AtomicLong();
    private volatile boolean closed;

    LocalCommunicator(Rendezvous group, int rank, Backend backend) {
        this.group = group;
        this.rank = rank;
        this.backend = backend;
        String threadName = "fsdp4j-comm-" + group.name() + "-r" + group.globalRank(rank);
        this.stream = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, threadName);
            t.setDaemon(true);
            return t;
        });
        group.fate().register(stream);
    }

    static CommException rankFailure(int rank, Throwable cause) {
        return new CommException("rank " + rank + " failed: " + describe(cause), cause);
    }

    private static String describe(Throwable t) {
        return t instanceof CommException ? t.getMessage() : t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return group.size();
    }

    @Override
    public String name() {
        return group.name();
    }

    @Override
    public CommCounters counters() {
        return counters;
    }

    // ------------------------------------------------------------------ collectives

    @Override
    public CommHandle allGather(Tensor input, Tensor output) {
        long n = input.numel();
        requireSameDtype("allGather", input, output);
        if (output.numel() != n * size()) {
            throw new IllegalArgumentException("allGather on '" + name() + "': output has " + output.numel()
                    + " elements, expected " + size() + " × " + n);
        }
        Tensor ownChunk = output.view(rank * n, n);
        boolean inPlace = sameRegion(input, ownChunk);
        if (!inPlace && overlaps(input, output)) {
            throw new IllegalArgumentException("allGather on '" + name() + "': the input overlaps the output "
                    + "other than as this rank's chunk");
        }
        String signature = "allGather(" + input.dtype().shortName() + ", " + n + ")";
        return submit(CommOp.ALL_GATHER, call -> {
            String where = call.where();
            Tensor[] inputs = exchangeBuffers(new Deposit(signature, input, 0, 0), where);
            for (int q = 0; q < size(); q++) {
                if (q == rank && inPlace) {
                    continue;
                }
                if (n > 0) {
                    backend.copy(inputs[q].reshape(n), output.view(q * n, n));
                }
            }
            group.barrier(rank, where + " (completion)");
            record(CommOp.ALL_GATHER, output.numBytes(), 0);
            return null;
        });
    }

    @Override
    public CommHandle reduceScatter(Tensor input, Tensor output, Reduction reduction) {
        long n = output.numel();
        requireSameDtype("reduceScatter", input, output);
        requireFloating("reduceScatter", input);
        if (input.numel() != n * size()) {
            throw new IllegalArgumentException("reduceScatter on '" + name() + "': input has " + input.numel()
                    + " elements, expected " + size() + " × " + n);
        }
        if (overlaps(input, output)) {
            throw new IllegalArgumentException("reduceScatter on '" + name() + "': the output overlaps the input");
        }
        String signature = "reduceScatter(" + input.dtype().shortName() + ", " + input.numel() + ", " + reduction + ")";
        return submit(CommOp.REDUCE_SCATTER, call -> {
            String where = call.where();
            Tensor[] inputs = exchangeBuffers(new Deposit(signature, input, 0, 0), where);
            reduceInto(inputs, rank * n, n, reduction, List.of(output.reshape(n)));
            group.barrier(rank, where + " (completion)");
            record(CommOp.REDUCE_SCATTER, input.numBytes(), 0);
            return null;
        });
    }

    @Override
    public CommHandle allReduce(Tensor buffer, Reduction reduction) {
        requireFloating("allReduce", buffer);
        String signature = "allReduce(" + buffer.dtype().shortName() + ", " + buffer.numel() + ", " + reduction + ")";
        return submit(CommOp.ALL_REDUCE, call -> {
            String where = call.where();
            Tensor[] buffers = exchangeBuffers(new Deposit(signature, buffer, 0, 0), where);
            // Rank r owns chunk r: it reads chunk r of every buffer and writes the result back to all
            // of them. Chunks are disjoint, so no rank reads what another is writing.
            long total = buffer.numel();
            long lo = rank * total / size();
            long hi = (rank + 1) * total / size();
            List<Tensor> destinations = new ArrayList<>();
            for (Tensor b : buffers) {
                destinations.add(b.reshape(total).view(lo, hi - lo));
            }
            reduceInto(buffers, lo, hi - lo, reduction, destinations);
            group.barrier(rank, where + " (completion)");
            record(CommOp.ALL_REDUCE, buffer.numBytes(), 0);
            return null;
        });
    }

    @Override
    public CommHandle broadcast(Tensor buffer, int root) {
        if (root < 0 || root >= size()) {
            throw new IllegalArgumentException("broadcast on '" + name() + "': root " + root
                    + " is outside a group of " + size());
        }
        String signature = "broadcast(" + buffer.dtype().shortName() + ", " + buffer.numel() + ", root " + root + ")";
        return submit(CommOp.BROADCAST, call -> {
            String where = call.where();
            Tensor[] buffers = exchangeBuffers(new Deposit(signature, buffer, 0, 0), where);
            if (rank != root && buffer.numel() > 0) {
                backend.copy(buffers[root], buffer);
            }
            group.barrier(rank, where + " (completion)");
            record(CommOp.BROADCAST, buffer.numBytes(), root);
            return null;
        });
    }

    @Override
    public CommHandle barrier() {
        return submit(CommOp.BARRIER, call -> {
            String where = call.where();
            exchangeBuffers(new Deposit("barrier()", null, 0, 0), where);
            return null;
        });
    }

    @Override
    public Communicator split(int color, int key, String name) {
        FutureHandle<Communicator> h = submit(CommOp.SPLIT, call -> {
            String where = call.where();
            Object[] all = group.exchange(rank, new Deposit("split()", null, color, key), where);
            checkSignatures(all, where);
            List<Integer> members = new ArrayList<>();
            for (int m = 0; m < all.length; m++) {
                if (((Deposit) all[m]).color == color) {
                    members.add(m);
                }
            }
            members.sort((a, b) -> {
                int c = Integer.compare(((Deposit) all[a]).key, ((Deposit) all[b]).key);
                return c != 0 ? c : Integer.compare(a, b);
            });
            int[] globalRanks = members.stream().mapToInt(group::globalRank).toArray();
            String subName = group.name() + "/" + name;
            Rendezvous sub = group.fate().subgroup(group.name() + "#" + call.seq() + ":" + color,
                    k -> new Rendezvous(subName, globalRanks, group.timeout(), group.fate()));
            return new LocalCommunicator(sub, members.indexOf(rank), backend);
        });
        return h.get();
    }

    @Override
    public void abort(Throwable cause) {
        group.fate().abort(rankFailure(group.globalRank(rank), cause));
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        stream.shutdown();
        try {
            if (!stream.awaitTermination(group.timeout().toMillis() * 2, TimeUnit.MILLISECONDS)) {
                throw new CommException("communicator '" + name() + "' at rank " + group.globalRank(rank)
                        + ": its stream did not stop within " + group.timeout().toMillis() * 2 + " ms");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            group.fate().unregister(stream);
        }
    }

    // ------------------------------------------------------------------ machinery

    private <T> FutureHandle<T> submit(CommOp op, Function<Call, T> body) {
        if (closed) {
            throw new IllegalStateException("communicator '" + name() + "' at rank " + group.globalRank(rank)
                    + " is closed");
        }
        long seq = issued.incrementAndGet();
        String where = op.label() + " #" + seq + " on '" + name() + "' at rank " + group.globalRank(rank);
        Call call = new Call(seq, where);
        CompletableFuture<T> future = new CompletableFuture<>();
        try {
            stream.execute(() -> {
                try {
                    group.fate().check(where);
                    future.complete(body.apply(call));
                } catch (CommException e) {
                    future.completeExceptionally(e);
                } catch (Throwable t) {
                    CommException e = new CommException(where + " failed: " + describe(t), t);
                    group.fate().abort(rankFailure(group.globalRank(rank), e));
                    future.completeExceptionally(e);
                }
            });
        } catch (RejectedExecutionException e) {
            try {
                group.fate().check(where);
                future.completeExceptionally(new CommException(where + ": the communicator's stream has stopped"));
            } catch (CommException aborted) {
                future.completeExceptionally(aborted);
            }
        }
        return new FutureHandle<>(future, where);
    }

    private Tensor[] exchangeBuffers(Deposit mine, String where) {
        Object[] all = group.exchange(rank, mine, where);
        checkSignatures(all, where);
        Tensor[] buffers = new Tensor[all.length];
        for (int i = 0; i < all.length; i++) {
            buffers[i] = ((Deposit) all[i]).buffer;
        }
        return buffers;
    }

    private void checkSignatures(Object[] all, String where) {
        String first = ((Deposit) all[0]).signature;
        for (Object o : all) {
            if (!((Deposit) o).signature.equals(first)) {
                StringBuilder b = new StringBuilder(where + ": ranks issued different collectives:");
                for (int m = 0; m < all.length; m++) {
                    b.append(" rank ").append(group.globalRank(m)).append(' ').append(((Deposit) all[m]).signature)
                            .append(m + 1 < all.length ? "," : "");
                }
                throw new IllegalStateException(b.toString());
            }
        }
    }

    /**
     * destinations[i] = reduction of sources[0..N−1][offset, offset+n), summed in fp32 in rank
     * order and rounded once to each destination's dtype.
     */
    private void reduceInto(Tensor[] sources, long offset, long n, Reduction reduction, List<Tensor> destinations) {
        if (n == 0) {
            return;
        }
        boolean accumulateInPlace = destinations.size() == 1 && destinations.get(0).dtype() == DType.F32
                && Arrays.stream(sources).noneMatch(s -> overlaps(s, destinations.get(0)));
        Tensor acc = accumulateInPlace ? destinations.get(0) : backend.allocate(DType.F32, MemoryCategory.WORKSPACE, n);
        try {
            backend.copy(sources[0].reshape(sources[0].numel()).view(offset, n), acc);
            for (int q = 1; q < sources.length; q++) {
                backend.accumulate(acc, sources[q].reshape(sources[q].numel()).view(offset, n));
            }
            double scale = reduction.scaleAfterSum(size());
            if (scale != 1.0) {
                backend.scale(acc, (float) scale);
            }
            for (Tensor d : destinations) {
                if (d != acc) {
                    backend.copy(acc, d);
                }
            }
        } finally {
            if (!accumulateInPlace) {
                acc.close();
            }
        }
    }

    private void record(CommOp op, long fullBytes, int root) {
        counters.record(op, op.sentBytes(fullBytes, size(), rank, root), op.receivedBytes(fullBytes, size(), rank, root));
    }

    private void requireSameDtype(String op, Tensor a, Tensor b) {
        if (a.dtype() != b.dtype()) {
            throw new IllegalArgumentException(op + " on '" + name() + "': input is " + a.dtype().shortName()
                    + " but output is " + b.dtype().shortName() + "; cast before the collective so one dtype travels");
        }
    }

    private void requireFloating(String op, Tensor t) {
        if (!t.dtype().isFloating()) {
            throw new IllegalArgumentException(op + " on '" + name() + "' reduces floating buffers, got " + t.dtype());
        }
    }

    private static boolean sameRegion(Tensor a, Tensor b) {
        return a.storage() == b.storage() && a.byteOffset() == b.byteOffset() && a.numBytes() == b.numBytes();
    }

    private static boolean overlaps(Tensor a, Tensor b) {
        return a.storage() == b.storage() && a.byteOffset() < b.byteOffset() + b.numBytes()
                && b.byteOffset() < a.byteOffset() + a.numBytes();
    }

    /** A handle over the stream's future; await rethrows with the waiting thread's stack. */
    private static final class FutureHandle<T> implements CommHandle {
        private final CompletableFuture<T> future;
        private final String where;

        FutureHandle(CompletableFuture<T> future, String where) {
            this.future = future;
            this.where = where;
        }

        @Override
        public void await() {
            get();
        }

        T get() {
            try {
                return future.get();
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                throw new CommException(c.getMessage(), c);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommException(where + ": interrupted while waiting");
            }
        }

        @Override
        public boolean isDone() {
            return future.isDone();
        }
    }
}
