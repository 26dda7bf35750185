// One rank's view of an in-process group. Every collective is the same three phases: the ranks
// meet and deposit their buffers, each rank reads what it needs from the others with backend ops
// (rank r reduces or copies only its own part, so the ranks' copies run in parallel like a ring),
// and a final meeting so that no rank's stream goes on to reuse a buffer another still reads.
// Where the phases run is the group's Dispatch:
//   HOST_FUNCTIONS  (CPU ranks) the whole collective is a host function queued on the stream it is
//                   given: the meetings happen when the streams get there, as NCCL's kernels meet,
//                   and the copies are CPU ops called from inside stream work, which run at once.
//   STREAM_EVENTS   (any backend, e.g. several ranks on one GPU) the ranks meet on the host when
//                   they issue the collective, trading an event recorded on each stream: every
//                   stream waits for the others' "inputs ready" events, its copies are issued on it
//                   as ordinary ops, and it waits for the others' "done reading" events before its
//                   later work. The host never waits for device work; it only meets the other hosts.
// A group of one never meets anyone: its collectives are plain backend ops on the stream.
// CPU ranks share the process's memory: sharedBuffer gives them one buffer, and a copy whose
// source already is its destination (an all-gather into such a buffer from its own chunks) is
// skipped, so that collective is only its two meetings.
package org.fsdp4j.comm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

final class LocalCommunicator implements Communicator {

    /**
     * What every rank deposits for a collective: the call's signature (checked to match), its
     * buffer and, under STREAM_EVENTS, the event after which its stream has the buffer ready;
     * for sharedBuffer, the tracker its part is charged to.
     */
    private record Deposit(String signature, Tensor buffer, Backend.Event ready, int color, int key,
                           MemoryTracker tracker) {
        Deposit(String signature, Tensor buffer, Backend.Event ready, int color, int key) {
            this(signature, buffer, ready, color, key, null);
        }
    }

    /** A collective's reading phase, given every rank's buffer (index = rank); it issues backend ops. */
    @FunctionalInterface
    private interface Body {
        void run(Tensor[] buffers);
    }

    private final Rendezvous group;
    private final int rank;
    private final Backend backend;
    private final LocalGroup.Dispatch dispatch;
    private final CommCounters counters = new CommCounters();
    private final AtomicLong issued = new AtomicLong();
    private Backend.Stream stream;      // the one stream this communicator's collectives run on, once used
    private volatile boolean closed;

    LocalCommunicator(Rendezvous group, int rank, Backend backend, LocalGroup.Dispatch dispatch) {
        this.group = group;
        this.rank = rank;
        this.backend = backend;
        this.dispatch = dispatch;
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
    public void allGather(Tensor input, Tensor output, Backend.Stream stream) {
        long n = input.numel();
        boolean inPlace = CollectiveChecks.allGather(name(), size(), rank, input, output);
        String signature = "allGather(" + input.dtype().shortName() + ", " + n + ")";
        if (size() == 1) {
            alone(stream, () -> {
                if (!inPlace && n > 0) {
                    backend.copy(input, output.view(0, n));
                }
            });
            return;
        }
        collective(CommOp.ALL_GATHER, stream, signature, input, inputs -> {
            for (int q = 0; q < size(); q++) {
                if (q == rank && inPlace) {
                    continue;
                }
                Tensor chunk = output.view(q * n, n);
                if (n > 0 && !sameBytes(inputs[q], chunk)) {
                    backend.copy(inputs[q].reshape(n), chunk);
                }
            }
        });
        record(CommOp.ALL_GATHER, output.numBytes(), 0);
    }

    @Override
    public void reduceScatter(Tensor input, Tensor output, Reduction reduction, Backend.Stream stream) {
        long n = output.numel();
        CollectiveChecks.reduceScatter(name(), size(), input, output);
        String signature = "reduceScatter(" + input.dtype().shortName() + ", " + input.numel() + ", " + reduction + ")";
        if (size() == 1) {
            alone(stream, () -> reduceInto(new Tensor[] {input}, 0, n, reduction, List.of(output.reshape(n))));
            return;
        }
        collective(CommOp.REDUCE_SCATTER, stream, signature, input,
                inputs -> reduceInto(inputs, rank * n, n, reduction, List.of(output.reshape(n))));
        record(CommOp.REDUCE_SCATTER, input.numBytes(), 0);
    }

    @Override
    public void allReduce(Tensor buffer, Reduction reduction, Backend.Stream stream) {
        CollectiveChecks.allReduce(name(), buffer);
        String signature = "allReduce(" + buffer.dtype().shortName() + ", " + buffer.numel() + ", " + reduction + ")";
        if (size() == 1) {
            alone(stream, () -> reduceInto(new Tensor[] {buffer}, 0, buffer.numel(), reduction,
                    List.of(buffer.reshape(buffer.numel()))));
            return;
        }
        collective(CommOp.ALL_REDUCE, stream, signature, buffer, buffers -> {
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
        });
        record(CommOp.ALL_REDUCE, buffer.numBytes(), 0);
    }

    @Override
    public void broadcast(Tensor buffer, int root, Backend.Stream stream) {
        CollectiveChecks.broadcast(name(), size(), root);
        String signature = "broadcast(" + buffer.dtype().shortName() + ", " + buffer.numel() + ", root " + root + ")";
        if (size() == 1) {
            checkOpen();
            bind(stream);
            return;
        }
        collective(CommOp.BROADCAST, stream, signature, buffer, buffers -> {
            if (rank != root && buffer.numel() > 0) {
                backend.copy(buffers[root], buffer);
            }
        });
        record(CommOp.BROADCAST, buffer.numBytes(), root);
    }

    @Override
    public void barrier(Backend.Stream stream) {
        if (size() == 1) {
            checkOpen();
            bind(stream);
            return;
        }
        collective(CommOp.BARRIER, stream, "barrier()", null, buffers -> { });
    }

    @Override
    public Communicator split(int color, int key, String name) {
        checkOpen();
        long seq = issued.incrementAndGet();
        String where = label(CommOp.SPLIT, seq);
        Communicator[] made = new Communicator[1];
        Runnable body = () -> made[0] = guarded(where, () -> {
            Object[] all = group.exchange(rank, new Deposit("split()", null, null, color, key), where);
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
            Rendezvous sub = group.fate().subgroup(group.name() + "#" + seq + ":" + color,
                    k -> new Rendezvous(subName, globalRanks, group.timeout(), group.fate()));
            return new LocalCommunicator(sub, members.indexOf(rank), backend, dispatch);
        });
        meetOnHost(body);
        return made[0];
    }

    @Override
    public boolean sharesMemory() {
        return dispatch == LocalGroup.Dispatch.HOST_FUNCTIONS && backend.device().isCpu();
    }

    @Override
    public SharedBuffer sharedBuffer(DType dtype, MemoryCategory category, long numel) {
        if (!sharesMemory()) {
            return Communicator.super.sharedBuffer(dtype, category, numel);
        }
        CollectiveChecks.sharedBuffer(name(), size(), numel);
        checkOpen();
        String where = "sharedBuffer #" + issued.incrementAndGet() + " on '" + name() + "' at rank "
                + group.globalRank(rank) + CommTag.suffix();
        String signature = "sharedBuffer(" + dtype.shortName() + ", " + numel + ", " + category.label() + ")";
        SharedBuffer[] mine = new SharedBuffer[1];
        meetOnHost(() -> mine[0] = guarded(where, () -> {
            Object[] all = exchange(new Deposit(signature, null, null, 0, 0, backend.memory()), where);
            List<SharedBuffer> handles = null;
            if (rank == 0) {
                List<MemoryTracker> charged = new ArrayList<>();
                for (Object d : all) {
                    charged.add(((Deposit) d).tracker());
                }
                handles = SharedBuffer.handles(backend.allocateShared(dtype, category, charged, numel), size());
            }
            Object[] made = group.exchange(rank, handles, where + " (hand-out)");
            @SuppressWarnings("unchecked")
            List<SharedBuffer> given = (List<SharedBuffer>) made[0];
            return given.get(rank);
        }));
        return mine[0];
    }

    /**
     * Runs {@code body}, in which the ranks meet on the host (set-up calls), in this rank's
     * collective order: at once if no collective was issued yet, or under STREAM_EVENTS (whose
     * meetings are on the host anyway); else after the collectives already queued on the stream,
     * the host waiting for it.
     */
    private void meetOnHost(Runnable body) {
        Backend.Stream bound;
        synchronized (this) {
            bound = stream;
        }
        if (bound == null || dispatch == LocalGroup.Dispatch.STREAM_EVENTS) {
            body.run();                        // the ranks meet on the host now, in issue order
            return;
        }
        bound.launchHostFunc(body);            // after the collectives already queued on its stream
        bound.synchronize();
    }

    @Override
    public void abort(Throwable cause) {
        group.fate().abort(rankFailure(group.globalRank(rank), cause));
    }

    @Override
    public void close() {
        closed = true;
    }

    // ------------------------------------------------------------------ machinery

    /** Runs a collective of two or more ranks on {@code stream}: meet, read with {@code body}, meet again. */
    private void collective(CommOp op, Backend.Stream stream, String signature, Tensor mine, Body body) {
        checkOpen();
        bind(stream);
        String where = label(op, issued.incrementAndGet());
        if (dispatch == LocalGroup.Dispatch.HOST_FUNCTIONS) {
            requireCpuStreams(op);
            stream.launchHostFunc(() -> guarded(where, () -> {
                Tensor[] buffers = buffers(exchange(new Deposit(signature, mine, null, 0, 0), where));
                body.run(buffers);
                group.barrier(rank, where + " (completion)");
                return null;
            }));
            return;
        }
        guarded(where, () -> {
            Object[] all = exchange(new Deposit(signature, mine, stream.record(), 0, 0), where);
            for (int q = 0; q < all.length; q++) {
                if (q != rank) {
                    stream.waitFor(((Deposit) all[q]).ready());     // their inputs are written
                }
            }
            try (Backend.StreamScope on = backend.onStream(stream)) {
                body.run(buffers(all));
            }
            Object[] done = group.exchange(rank, stream.record(), where + " (completion)");
            for (int q = 0; q < done.length; q++) {
                if (q != rank) {
                    stream.waitFor((Backend.Event) done[q]);           // they have read ours
                }
            }
            return null;
        });
    }

    /**
     * Runs a collective's body: fails at once if the group was aborted; any failure aborts the
     * group (a CommException with itself as the cause: a no-op where the group's own timeout or
     * abort raised it), so that no rank waits for it.
     */
    <T> T guarded(String where, java.util.function.Supplier<T> body) {
        try {
            group.fate().check(where);
            return body.get();
        } catch (CommException e) {
            group.fate().abort(e);
            throw e;
        } catch (Throwable t) {
            CommException e = new CommException(where + " failed: " + describe(t), t);
            group.fate().abort(rankFailure(group.globalRank(rank), e));
            throw e;
        }
    }

    /** A group of one: the collective is plain backend work on the stream. */
    private void alone(Backend.Stream stream, Runnable ops) {
        checkOpen();
        bind(stream);
        try (Backend.StreamScope scope = backend.onStream(stream)) {
            ops.run();
        }
    }

    private String label(CommOp op, long seq) {
        return op.label() + " #" + seq + " on '" + name() + "' at rank " + group.globalRank(rank) + CommTag.suffix();
    }

    /** Binds this communicator to its first stream; another stream is a usage error (split one per stream). */
    private synchronized void bind(Backend.Stream s) {
        if (s == null) {
            throw new IllegalArgumentException("communicator '" + name() + "': a collective needs a stream");
        }
        if (stream == null) {
            stream = s;
        } else if (stream != s) {
            throw new IllegalArgumentException("communicator '" + name() + "' at rank " + group.globalRank(rank)
                    + " runs its collectives on stream '" + stream.name() + "', not '" + s.name()
                    + "': split() a communicator for each stream that issues collectives");
        }
    }

    /** The copies inside a collective's host function are backend ops, which only the CPU backend runs there (CUDA forbids it). */
    private void requireCpuStreams(CommOp op) {
        if (!backend.device().isCpu()) {
            throw new IllegalArgumentException(op.label() + " on '" + name() + "': the in-process group moves data"
                    + " between CPU ranks; " + size() + " ranks on " + backend.device()
                    + " need the NCCL communicator");
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("communicator '" + name() + "' at rank " + group.globalRank(rank)
                    + " is closed");
        }
    }

    /** Deposits {@code mine}, meets every rank, and checks that they all issued the same collective. */
    private Object[] exchange(Deposit mine, String where) {
        Object[] all = group.exchange(rank, mine, where);
        checkSignatures(all, where);
        return all;
    }

    /** Whether a and b are the same bytes of the same storage (a copy between them would change nothing). */
    private static boolean sameBytes(Tensor a, Tensor b) {
        return a.rawStorage() == b.rawStorage() && a.byteOffset() == b.byteOffset() && a.numBytes() == b.numBytes();
    }

    private static Tensor[] buffers(Object[] deposits) {
        Tensor[] buffers = new Tensor[deposits.length];
        for (int i = 0; i < deposits.length; i++) {
            buffers[i] = ((Deposit) deposits[i]).buffer;
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

    private void reduceInto(Tensor[] sources, long offset, long n, Reduction reduction, List<Tensor> destinations) {
        Reductions.reduceInto(backend, size(), sources, offset, n, reduction, destinations);
    }

    /** Counts the bytes of a collective when it is issued (what it will move is known then, as NCCL's would be). */
    private void record(CommOp op, long fullBytes, int root) {
        counters.record(op, op.sentBytes(fullBytes, size(), rank, root), op.receivedBytes(fullBytes, size(), rank, root));
    }
}
