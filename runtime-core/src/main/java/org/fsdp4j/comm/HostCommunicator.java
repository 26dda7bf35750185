// What the two host-side communicators share: the in-process group's (LocalCommunicator: ranks
// are threads of one JVM) and the TCP group's (TcpCommunicator: ranks in several processes).
// Both run a collective as work the host does, queued on the one stream the communicator is
// bound to, so everything but the moving of bytes is the same and lives here: the argument
// checks and the call's signature, a group of one (plain backend work on the stream), numbering
// and labelling each collective for messages, the meeting of the ranks of this process and its
// check that they issued the same collective, the one failure policy (whatever fails inside a
// collective aborts the whole group at once), set-up calls run in collective order, the byte
// counters, and close/abort. A subclass says how its ranks move the bytes (the *Among methods),
// how they split, and how they come to hold one buffer.
package org.fsdp4j.comm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

abstract class HostCommunicator implements Communicator {

    /**
     * What a rank deposits where the ranks of a process meet: the call's signature (checked to
     * match) and its buffer; under stream events, the event after which its stream has the buffer
     * ready; for a split, colour and key; for sharedBuffer, the tracker its part is charged to.
     */
    record Deposit(String signature, Tensor buffer, Backend.Event ready, int color, int key, MemoryTracker tracker) {

        static Deposit of(String signature, Tensor buffer) {
            return new Deposit(signature, buffer, null, 0, 0, null);
        }

        static Deposit split(int color, int key) {
            return new Deposit("split()", null, null, color, key, null);
        }

        static Deposit charged(String signature, MemoryTracker tracker) {
            return new Deposit(signature, null, null, 0, 0, tracker);
        }
    }

    /** A collective's work once the ranks of this process have met: {@code buffers} are theirs, by index there. */
    @FunctionalInterface
    interface Body {
        void run(String where, long startNanos, Tensor[] buffers);
    }

    /** Issues a numbered, labelled collective: {@code seq} counts this communicator's calls, {@code where} names it. */
    @FunctionalInterface
    interface Issue {
        void on(long seq, String where);
    }

    protected final Backend backend;
    private final String name;
    private final int rank;
    private final int size;
    private final int globalRank;           // this rank's world rank, as messages name it
    private final GroupFate fate;
    private final CommCounters counters = new CommCounters();
    private final AtomicLong issued = new AtomicLong();
    private Backend.Stream stream;          // the one stream this communicator's collectives run on, once used
    private volatile boolean closed;

    HostCommunicator(String name, int rank, int size, int globalRank, GroupFate fate, Backend backend) {
        this.name = name;
        this.rank = rank;
        this.size = size;
        this.globalRank = globalRank;
        this.fate = fate;
        this.backend = backend;
    }

    /** The cause a group is aborted with when world rank {@code rank} failed with {@code cause}. */
    static CommException rankFailure(int rank, Throwable cause) {
        return new CommException("rank " + rank + " failed: " + describe(cause), cause);
    }

    static String describe(Throwable t) {
        return t instanceof CommException ? t.getMessage() : t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    @Override
    public final int rank() {
        return rank;
    }

    @Override
    public final int size() {
        return size;
    }

    @Override
    public final String name() {
        return name;
    }

    @Override
    public final CommCounters counters() {
        return counters;
    }

    final int globalRank() {
        return globalRank;
    }

    final GroupFate fate() {
        return fate;
    }

    // ------------------------------------------------------------------ collectives

    @Override
    public final void allGather(Tensor input, Tensor output, Backend.Stream stream) {
        long n = input.numel();
        boolean inPlace = CollectiveChecks.allGather(name, size, rank, input, output);
        if (size == 1) {
            alone(stream, () -> {
                if (!inPlace && n > 0) {
                    backend.copy(input, output.view(0, n));
                }
            });
            return;
        }
        allGatherAmong(input, output, inPlace, "allGather(" + input.dtype().shortName() + ", " + n + ")", stream);
        record(CommOp.ALL_GATHER, output.numBytes(), 0);
    }

    @Override
    public final void reduceScatter(Tensor input, Tensor output, Reduction reduction, Backend.Stream stream) {
        long n = output.numel();
        CollectiveChecks.reduceScatter(name, size, input, output);
        if (size == 1) {
            alone(stream, () -> Reductions.reduceInto(backend, 1, new Tensor[] {input}, 0, n, reduction,
                    List.of(output.reshape(n))));
            return;
        }
        reduceScatterAmong(input, output, reduction,
                "reduceScatter(" + input.dtype().shortName() + ", " + input.numel() + ", " + reduction + ")", stream);
        record(CommOp.REDUCE_SCATTER, input.numBytes(), 0);
    }

    @Override
    public final void allReduce(Tensor buffer, Reduction reduction, Backend.Stream stream) {
        long total = buffer.numel();
        CollectiveChecks.allReduce(name, buffer);
        if (size == 1) {
            alone(stream, () -> Reductions.reduceInto(backend, 1, new Tensor[] {buffer}, 0, total, reduction,
                    List.of(buffer.reshape(total))));
            return;
        }
        allReduceAmong(buffer, reduction,
                "allReduce(" + buffer.dtype().shortName() + ", " + total + ", " + reduction + ")", stream);
        record(CommOp.ALL_REDUCE, buffer.numBytes(), 0);
    }

    @Override
    public final void broadcast(Tensor buffer, int root, Backend.Stream stream) {
        CollectiveChecks.broadcast(name, size, root);
        if (size == 1) {
            checkOpen();
            bind(stream);
            return;
        }
        broadcastAmong(buffer, root,
                "broadcast(" + buffer.dtype().shortName() + ", " + buffer.numel() + ", root " + root + ")", stream);
        record(CommOp.BROADCAST, buffer.numBytes(), root);
    }

    @Override
    public final void barrier(Backend.Stream stream) {
        if (size == 1) {
            checkOpen();
            bind(stream);
            return;
        }
        barrierAmong(stream);
    }

    @Override
    public final Communicator split(int color, int key, String name) {
        checkOpen();
        long seq = issued.incrementAndGet();
        String where = label(CommOp.SPLIT, seq);
        Communicator[] made = new Communicator[1];
        onHostInOrder(() -> made[0] = guarded(where, () -> splitAmong(color, key, name, seq, where)));
        return made[0];
    }

    @Override
    public final SharedBuffer sharedBuffer(DType dtype, MemoryCategory category, long numel) {
        if (!sharesMemory()) {
            return Communicator.super.sharedBuffer(dtype, category, numel);
        }
        CollectiveChecks.sharedBuffer(name, size, numel);
        checkOpen();
        long seq = issued.incrementAndGet();
        String where = "sharedBuffer #" + seq + " on '" + name + "' at rank " + globalRank + CommTag.suffix();
        String signature = "sharedBuffer(" + dtype.shortName() + ", " + numel + ", " + category.label() + ")";
        SharedBuffer[] mine = new SharedBuffer[1];
        onHostInOrder(() -> mine[0] = guarded(where, () -> shareAmong(where, seq, signature, dtype, category, numel)));
        return mine[0];
    }

    @Override
    public final void abort(Throwable cause) {
        fate.abort(rankFailure(globalRank, cause));
    }

    /** Closes this communicator (its queued collectives still run), then {@link #closed}. Idempotent. */
    @Override
    public final void close() {
        Backend.Stream s;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            s = stream;
        }
        closed(s);
    }

    // ------------------------------------------------------------------ what a transport does

    /**
     * All-gather among two or more ranks, checked: input (n) of every rank into output (size · n);
     * {@code inPlace}, input is this rank's chunk of output. The same holds for each *Among method:
     * the call is checked, {@code signature} is what the ranks must agree on, and the base counts
     * the bytes once it returns.
     */
    protected abstract void allGatherAmong(Tensor input, Tensor output, boolean inPlace, String signature,
                                           Backend.Stream stream);

    /** Reduce-scatter: output (n) = reduction over ranks of chunk rank of input (size · n). */
    protected abstract void reduceScatterAmong(Tensor input, Tensor output, Reduction reduction, String signature,
                                               Backend.Stream stream);

    /** All-reduce: buffer (n) = reduction over ranks of buffer (n), in place. */
    protected abstract void allReduceAmong(Tensor buffer, Reduction reduction, String signature, Backend.Stream stream);

    /** Broadcast: buffer (n) = root's buffer (n). */
    protected abstract void broadcastAmong(Tensor buffer, int root, String signature, Backend.Stream stream);

    /** A barrier among two or more ranks. */
    protected abstract void barrierAmong(Backend.Stream stream);

    /** split's meeting, on the host in collective order, guarded: the new communicator of this rank. */
    protected abstract Communicator splitAmong(int color, int key, String name, long seq, String where);

    /** sharedBuffer's meeting, on the host in collective order, guarded: this rank's handle, or null on every rank. */
    protected abstract SharedBuffer shareAmong(String where, long seq, String signature, DType dtype,
                                               MemoryCategory category, long numel);

    /**
     * The failure thrown where the ranks of a process issued different collectives ({@code message}
     * names each). This and failureText are where the two groups' messages still differ, as before
     * the base: the in-process group reports a mismatch as a caller's bug (wrapped as this rank's
     * failure, "IllegalStateException: …"), TCP as a CommException; TCP names a failure with its
     * class's full name.
     */
    protected abstract RuntimeException differentCollectives(String message);

    /** How a failure inside a collective is told in "… failed: " messages. */
    protected abstract String failureText(Throwable t);

    /** Whether set-up calls meet on the host at once even after collectives were queued (they meet there anyway). */
    protected boolean meetsOnHost() {
        return false;
    }

    /** After close(): {@code lastStream} is the stream collectives were queued on, or null if none was. */
    protected void closed(Backend.Stream lastStream) {
    }

    // ------------------------------------------------------------------ machinery

    /** Checks the communicator is open, binds {@code stream}, numbers and labels the collective, then {@code issue}. */
    final void issue(CommOp op, Backend.Stream stream, Issue issue) {
        checkOpen();
        bind(stream);
        long seq = issued.incrementAndGet();
        issue.on(seq, label(op, seq));
    }

    /**
     * Queues the collective {@code where} on {@code stream} as a host function: the ranks of this
     * process meet at {@code meeting} (null: this rank is alone here) depositing {@code mine},
     * {@code body} runs, and a final meeting keeps every buffer alive until the others have read it.
     */
    final void inHostFunction(Backend.Stream stream, String where, Rendezvous meeting, int member, Deposit mine,
                              Body body) {
        stream.launchHostFunc(() -> guarded(where, () -> {
            long start = System.nanoTime();
            body.run(where, start, buffers(meet(meeting, member, mine, where)));
            if (meeting != null) {
                meeting.barrier(member, where + " (completion)");
            }
            return null;
        }));
    }

    /**
     * Deposits {@code mine} as member {@code member} of {@code meeting} and returns every member's
     * deposit (index = member there), after checking that they all issued the same collective;
     * just {@code mine} where there is no meeting.
     */
    final Object[] meet(Rendezvous meeting, int member, Deposit mine, String where) {
        if (meeting == null) {
            return new Object[] {mine};
        }
        Object[] all = meeting.exchange(member, mine, where);
        String first = ((Deposit) all[0]).signature();
        for (Object o : all) {
            if (!((Deposit) o).signature().equals(first)) {
                StringBuilder b = new StringBuilder(where + ": ranks issued different collectives:");
                for (int m = 0; m < all.length; m++) {
                    b.append(" rank ").append(meeting.globalRank(m)).append(' ').append(((Deposit) all[m]).signature())
                            .append(m + 1 < all.length ? "," : "");
                }
                throw differentCollectives(b.toString());
            }
        }
        return all;
    }

    /**
     * Runs a collective's body: fails at once if the group was aborted; any failure aborts the
     * group, so that no rank waits for it: a CommException as itself (a no-op where the group's
     * own timeout or abort raised it), anything else (a bug, a bad buffer) as this rank's failure.
     */
    final <T> T guarded(String where, Supplier<T> body) {
        try {
            fate.check(where);
            return body.get();
        } catch (CommException e) {
            fate.abort(e);
            throw e;
        } catch (Throwable t) {
            CommException e = new CommException(where + " failed: " + failureText(t), t);
            fate.abort(rankFailure(globalRank, e));
            throw e;
        }
    }

    /**
     * Runs {@code body}, in which the ranks meet on the host (set-up calls), in this rank's
     * collective order: at once if nothing was queued on this communicator yet, or where it
     * {@link #meetsOnHost}; else after the collectives already queued on its stream, the host
     * waiting for it.
     */
    private void onHostInOrder(Runnable body) {
        Backend.Stream bound;
        synchronized (this) {
            bound = stream;
        }
        if (bound == null || meetsOnHost()) {
            body.run();                        // the ranks meet on the host now, in issue order
            return;
        }
        bound.launchHostFunc(body);            // after the collectives already queued on its stream
        bound.synchronize();
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
        return op.label() + " #" + seq + " on '" + name + "' at rank " + globalRank + CommTag.suffix();
    }

    /** Binds this communicator to its first stream; another stream is a usage error (split one per stream). */
    private synchronized void bind(Backend.Stream s) {
        if (s == null) {
            throw new IllegalArgumentException("communicator '" + name + "': a collective needs a stream");
        }
        if (stream == null) {
            stream = s;
        } else if (stream != s) {
            throw new IllegalArgumentException("communicator '" + name + "' at rank " + globalRank
                    + " runs its collectives on stream '" + stream.name() + "', not '" + s.name()
                    + "': split() a communicator for each stream that issues collectives");
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("communicator '" + name + "' at rank " + globalRank + " is closed");
        }
    }

    /** Counts the bytes of a collective when it is issued (what it will move is known then, as NCCL's would be). */
    private void record(CommOp op, long fullBytes, int root) {
        counters.record(op, op.sentBytes(fullBytes, size, rank, root), op.receivedBytes(fullBytes, size, rank, root));
    }

    /** The buffers of {@code deposits}, by index. */
    static Tensor[] buffers(Object[] deposits) {
        Tensor[] buffers = new Tensor[deposits.length];
        for (int i = 0; i < deposits.length; i++) {
            buffers[i] = ((Deposit) deposits[i]).buffer();
        }
        return buffers;
    }

    /** The trackers of {@code deposits}, by index: what a shared buffer is charged to. */
    static List<MemoryTracker> trackers(Object[] deposits) {
        List<MemoryTracker> trackers = new ArrayList<>();
        for (Object d : deposits) {
            trackers.add(((Deposit) d).tracker());
        }
        return trackers;
    }

    /**
     * The first member of {@code meeting} (null: this rank alone) hands a handle of {@code owner},
     * which only it passes (null: none), to each member; this member's, or null where it had none.
     */
    static SharedBuffer handOut(Rendezvous meeting, int member, Tensor owner, String where) {
        List<SharedBuffer> handles = owner == null ? null
                : SharedBuffer.handles(owner, meeting == null ? 1 : meeting.size());
        Object[] made = meeting == null ? new Object[] {handles} : meeting.exchange(member, handles, where + " (hand-out)");
        @SuppressWarnings("unchecked")
        List<SharedBuffer> given = (List<SharedBuffer>) made[0];
        return given == null ? null : given.get(member);
    }
}
