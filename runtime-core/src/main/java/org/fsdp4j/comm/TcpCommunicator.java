// One rank's view of a group whose members live in several processes (TcpGroup). As in the
// in-process group, a collective is a host function on the stream it is given: the members of
// this process meet and deposit their buffers (Rendezvous), every rank then exchanges frames
// directly with each member in another process (PeerLinks: over TCP, or through shared-memory
// rings with a member on the same host), reads its local peers' buffers, and a final meeting
// keeps every local buffer alive until the others have read it.
//
// The algorithms are direct exchanges, not rings: rank r receives chunk r of every remote
// member's input and reduces it together with its local peers' chunks in member order 0..N−1,
// in fp32, rounding once (Reductions, the in-process group's own arithmetic), so a run of
// 2 processes × 2 ranks reduces to exactly the bits of 4 in-process ranks. Each rank still sends
// and receives at most the ring's (N−1)/N of the buffer; a ring would need N−1 hops in a row and
// a rotated summation order. Large messages go in frames of Wire.MAX_FRAME_BYTES, and reductions
// proceed a frame at a time, so a reduce-scatter stages at most one frame per remote member.
// Byte counters follow CommOp's ring convention, at issue time, as the in-process group's do.
package org.fsdp4j.comm;

import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.cpu.CpuStorage;

final class TcpCommunicator implements Communicator {

    /** What the members of this process deposit for a collective: its signature (checked to match) and buffer. */
    private record Deposit(String signature, Tensor buffer, int color, int key) {
    }

    /** A collective's work once the local members have met: {@code locals} are their buffers, by local index. */
    @FunctionalInterface
    private interface Body {
        void run(String where, Wire.Frame frame, long startNanos, Tensor[] locals);
    }

    private final TcpGroup group;
    private final String key;               // names this communicator's connections in every process
    private final String name;
    private final int[] members;            // member i is world rank members[i]
    private final int me;
    private final int[] localMembers;       // member indices in this process, ascending
    private final int[] localIndexOf;       // member → index in localMembers, or −1
    private final int[] remoteMembers;      // member indices in other processes, ascending
    private final int[] remoteIndexOf;      // member → index in remoteMembers, or −1
    private final Rendezvous local;         // the members in this process; null when this rank is alone here
    private final PeerLinks links;
    private final Backend backend;
    private final CommCounters counters = new CommCounters();
    private final AtomicLong issued = new AtomicLong();
    private Backend.Stream stream;          // the one stream this communicator's collectives run on, once used
    private volatile boolean closed;

    /**
     * Member {@code me} of the group of world ranks {@code members}; connects to every member in
     * another process (blocking, up to the group's timeout). Every member builds its own at
     * about the same time (a split, or the world's creation).
     */
    TcpCommunicator(TcpGroup group, String key, String name, int[] members, int me, Backend backend) {
        this.group = group;
        this.key = key;
        this.name = name;
        this.members = members.clone();
        this.me = me;
        this.backend = backend;
        List<Integer> locals = new ArrayList<>();
        List<Integer> remotes = new ArrayList<>();
        this.localIndexOf = new int[members.length];
        this.remoteIndexOf = new int[members.length];
        for (int i = 0; i < members.length; i++) {
            localIndexOf[i] = -1;
            remoteIndexOf[i] = -1;
            if (group.isLocal(members[i])) {
                localIndexOf[i] = locals.size();
                locals.add(i);
            } else {
                remoteIndexOf[i] = remotes.size();
                remotes.add(i);
            }
        }
        this.localMembers = locals.stream().mapToInt(Integer::intValue).toArray();
        this.remoteMembers = remotes.stream().mapToInt(Integer::intValue).toArray();
        int[] localRanks = locals.stream().mapToInt(i -> members[i]).toArray();
        this.local = localMembers.length > 1
                ? group.fate().subgroup(key, k -> new Rendezvous(name, localRanks, group.timeout(), group.fate())) : null;
        Map<Integer, SocketChannel> channels = new LinkedHashMap<>();
        Map<Integer, ShmPipe> pipes = new LinkedHashMap<>();
        try {
            // lower ranks open, higher ranks accept; each rank sets its pairs up in the order (lower, higher) of the
            // pair, every rank alike, so the rings' offer and answer never wait on each other in a cycle
            for (int q : remoteMembers) {
                SocketChannel ch = group.connect(key, members[me], members[q]);
                channels.put(q, ch);
                ShmPipe pipe = ShmPipe.negotiate(ch, members[me] < members[q], group.sharedMemory(), group.timeout());
                if (pipe != null) {
                    pipes.put(q, pipe);
                }
            }
        } catch (RuntimeException e) {
            channels.values().forEach(PeerListener::closeQuietly);
            pipes.values().forEach(ShmPipe::release);      // set up before the failure; nothing runs on them
            CommException why = group.fate().isAborted() ? new CommException(group.fate().cause().getMessage(), e)
                    : new CommException("communicator '" + name + "' at rank " + members[me] + " cannot reach its peers: "
                            + e.getMessage(), e);
            group.fate().abort(why);
            throw why;
        }
        this.links = new PeerLinks(channels, pipes, q -> group.describe(members[q]));
        group.register(this);
    }

    @Override
    public int rank() {
        return me;
    }

    @Override
    public int size() {
        return members.length;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public CommCounters counters() {
        return counters;
    }

    // ------------------------------------------------------------------ collectives

    @Override
    public void allGather(Tensor input, Tensor output, Backend.Stream stream) {
        boolean inPlace = CollectiveChecks.allGather(name, size(), me, input, output);
        long n = input.numel();
        String signature = "allGather(" + input.dtype().shortName() + ", " + n + ")";
        if (size() == 1) {
            alone(stream, () -> {
                if (!inPlace && n > 0) {
                    backend.copy(input, output.view(0, n));
                }
            });
            return;
        }
        ByteBuffer in = bytes(input);
        ByteBuffer out = bytes(output);
        int chunkBytes = (int) input.numBytes();
        collective(CommOp.ALL_GATHER, stream, signature, input, input.dtype(), n, (where, frame, start, locals) -> {
            for (int q : remoteMembers) {
                links.sendMessage(q, frame, in.duplicate(), 0);
                links.receiveMessage(q, frame, out.slice(q * chunkBytes, chunkBytes), 0);
            }
            runLinks(where, start);
            for (int l = 0; l < localMembers.length; l++) {
                int q = localMembers[l];
                if (n > 0 && !(q == me && inPlace)) {
                    backend.copy(locals[l].reshape(n), output.view(q * n, n));
                }
            }
        });
        record(CommOp.ALL_GATHER, output.numBytes(), 0);
    }

    @Override
    public void reduceScatter(Tensor input, Tensor output, Reduction reduction, Backend.Stream stream) {
        CollectiveChecks.reduceScatter(name, size(), input, output);
        long n = output.numel();
        DType dtype = input.dtype();
        String signature = "reduceScatter(" + dtype.shortName() + ", " + input.numel() + ", " + reduction + ")";
        if (size() == 1) {
            alone(stream, () -> Reductions.reduceInto(backend, 1, new Tensor[] {input}, 0, n, reduction,
                    List.of(output.reshape(n))));
            return;
        }
        ByteBuffer in = bytes(input);
        collective(CommOp.REDUCE_SCATTER, stream, signature, input, dtype, input.numel(), (where, frame, start, locals) -> {
            long[] lo = new long[size()];
            long[] len = new long[size()];
            for (int i = 0; i < size(); i++) {
                lo[i] = i * n;
                len[i] = n;
            }
            reduceMyChunk(where, frame, start, locals, in, lo, len, reduction, List.of(output.reshape(n)), 0);
        });
        record(CommOp.REDUCE_SCATTER, input.numBytes(), 0);
    }

    @Override
    public void allReduce(Tensor buffer, Reduction reduction, Backend.Stream stream) {
        CollectiveChecks.allReduce(name, buffer);
        long total = buffer.numel();
        DType dtype = buffer.dtype();
        String signature = "allReduce(" + dtype.shortName() + ", " + total + ", " + reduction + ")";
        if (size() == 1) {
            alone(stream, () -> Reductions.reduceInto(backend, 1, new Tensor[] {buffer}, 0, total, reduction,
                    List.of(buffer.reshape(total))));
            return;
        }
        ByteBuffer buf = bytes(buffer);
        int ds = dtype.byteSize();
        collective(CommOp.ALL_REDUCE, stream, signature, buffer, dtype, total, (where, frame, start, locals) -> {
            // member i owns chunk [lo_i, lo_i + len_i), the in-process group's split
            long[] lo = new long[size()];
            long[] len = new long[size()];
            for (int i = 0; i < size(); i++) {
                lo[i] = i * total / size();
                len[i] = (i + 1) * total / size() - lo[i];
            }
            // 1: reduce my chunk from every member's buffer into every local buffer (they read it there)
            List<Tensor> destinations = new ArrayList<>();
            for (Tensor t : locals) {
                destinations.add(t.reshape(total).view(lo[me], len[me]));
            }
            int rounds = reduceMyChunk(where, frame, start, locals, buf, lo, len, reduction, destinations, 0);
            // 2: every member sends its reduced chunk to the members in other processes
            for (int q : remoteMembers) {
                links.sendMessage(q, frame, buf.slice((int) (lo[me] * ds), (int) (len[me] * ds)), rounds);
                links.receiveMessage(q, frame, buf.slice((int) (lo[q] * ds), (int) (len[q] * ds)), rounds);
            }
            runLinks(where, start);
        });
        record(CommOp.ALL_REDUCE, buffer.numBytes(), 0);
    }

    @Override
    public void broadcast(Tensor buffer, int root, Backend.Stream stream) {
        CollectiveChecks.broadcast(name, size(), root);
        String signature = "broadcast(" + buffer.dtype().shortName() + ", " + buffer.numel() + ", root " + root + ")";
        if (size() == 1) {
            checkOpen();
            bind(stream);
            return;
        }
        ByteBuffer buf = bytes(buffer);
        collective(CommOp.BROADCAST, stream, signature, buffer, buffer.dtype(), buffer.numel(), (where, frame, start, locals) -> {
            if (me == root) {
                for (int q : remoteMembers) {
                    links.sendMessage(q, frame, buf.duplicate(), 0);
                }
            } else if (localIndexOf[root] < 0) {
                links.receiveMessage(root, frame, buf.duplicate(), 0);
            } else if (buffer.numel() > 0) {
                backend.copy(locals[localIndexOf[root]], buffer);
            }
            runLinks(where, start);
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
        collective(CommOp.BARRIER, stream, "barrier()", null, null, 0, (where, frame, start, locals) -> {
            for (int q : remoteMembers) {
                links.send(q, frame, ByteBuffer.allocate(0));
                links.receive(q, frame, ByteBuffer.allocate(0));
            }
            runLinks(where, start);
        });
    }

    @Override
    public Communicator split(int color, int key, String subName) {
        checkOpen();
        Backend.Stream bound;
        synchronized (this) {
            bound = stream;
        }
        long seq = issued.incrementAndGet();
        String where = label(CommOp.SPLIT, seq);
        Communicator[] made = new Communicator[1];
        Runnable body = () -> made[0] = guarded(where, () -> {
            long start = System.nanoTime();
            Object[] deposits = meet(new Deposit("split()", null, color, key), where);
            int[] colors = new int[size()];
            int[] keys = new int[size()];
            for (int l = 0; l < localMembers.length; l++) {
                colors[localMembers[l]] = ((Deposit) deposits[l]).color;
                keys[localMembers[l]] = ((Deposit) deposits[l]).key;
            }
            Wire.Frame frame = new Wire.Frame(Wire.SPLIT_INFO, -1, seq, 0, "split()".hashCode(), 0, 8);
            ByteBuffer[] theirs = new ByteBuffer[size()];
            for (int q : remoteMembers) {
                links.send(q, frame, ByteBuffer.allocate(8).putInt(color).putInt(key).flip());
                theirs[q] = ByteBuffer.allocate(8);
                links.receive(q, frame, theirs[q]);
            }
            runLinks(where, start);
            for (int q : remoteMembers) {
                colors[q] = theirs[q].getInt(0);
                keys[q] = theirs[q].getInt(4);
            }
            List<Integer> sub = new ArrayList<>();
            for (int i = 0; i < size(); i++) {
                if (colors[i] == color) {
                    sub.add(i);
                }
            }
            sub.sort((a, b) -> keys[a] != keys[b] ? Integer.compare(keys[a], keys[b]) : Integer.compare(a, b));
            int[] subRanks = sub.stream().mapToInt(i -> members[i]).toArray();
            if (local != null) {
                local.barrier(localIndexOf[me], where + " (completion)");
            }
            return new TcpCommunicator(group, this.key + "#" + seq + ":" + color, name + "/" + subName, subRanks,
                    sub.indexOf(me), backend);
        });
        if (bound == null) {
            body.run();                        // nothing queued on this communicator: meet the others now
        } else {
            bound.launchHostFunc(body);        // after the collectives already queued on its stream
            bound.synchronize();
        }
        return made[0];
    }

    @Override
    public void abort(Throwable cause) {
        group.fate().abort(LocalCommunicator.rankFailure(members[me], cause));
    }

    /** Releases the connections once the collectives queued on its stream have run. Idempotent. */
    @Override
    public void close() {
        Backend.Stream s;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            s = stream;
        }
        group.unregister(this);
        if (s != null) {
            try {
                s.launchHostFunc(links::close);
                return;
            } catch (RuntimeException streamClosed) {
                // its stream is gone, and with it every queued collective
            }
        }
        links.close();
    }

    /** Closes the connections now (the group was aborted or closed). */
    void closeLinks() {
        links.close();
    }

    // ------------------------------------------------------------------ machinery

    /**
     * Member me's chunk [lo[me], lo[me] + len[me]) reduced over every member's buffer (the local
     * members' {@code locals}, the remote members' {@code bytes} as they send them) into
     * {@code destinations}, a frame's worth at a time; chunk q of this rank's {@code bytes} goes
     * to member q. Returns the frame indices used (the next phase numbers its frames from there).
     */
    private int reduceMyChunk(String where, Wire.Frame frame, long start, Tensor[] locals, ByteBuffer bytes, long[] lo,
                              long[] len, Reduction reduction, List<Tensor> destinations, int firstIndex) {
        DType dtype = locals[localIndexOf[me]].dtype();
        int ds = dtype.byteSize();
        long seg = Wire.MAX_FRAME_BYTES / ds;
        int rounds = 0;
        for (long l : len) {
            rounds = Math.max(rounds, segments(l, seg));
        }
        long cap = Math.min(seg, len[me]);
        Tensor staging = remoteMembers.length > 0 && cap > 0
                ? backend.allocate(dtype, MemoryCategory.WORKSPACE, remoteMembers.length * cap) : null;
        try {
            ByteBuffer stage = staging == null ? null : bytes(staging);
            for (int k = 0; k < rounds; k++) {
                long a = k * seg;
                for (int q : remoteMembers) {
                    if (k < segments(len[q], seg)) {
                        long l = Math.min(seg, len[q] - a);
                        links.send(q, frame.frame(firstIndex + k, (int) (l * ds)),
                                bytes.slice((int) ((lo[q] + a) * ds), (int) (l * ds)));
                    }
                    if (k < segments(len[me], seg)) {
                        long l = Math.min(seg, len[me] - a);
                        links.receive(q, frame.frame(firstIndex + k, (int) (l * ds)), stage == null ? ByteBuffer.allocate(0)
                                : stage.slice((int) (remoteIndexOf[q] * cap * ds), (int) (l * ds)));
                    }
                }
                runLinks(where, start);
                long l = Math.min(seg, len[me] - a);
                if (l <= 0) {
                    continue;
                }
                Tensor[] sources = new Tensor[size()];
                for (int i = 0; i < size(); i++) {
                    sources[i] = localIndexOf[i] >= 0
                            ? locals[localIndexOf[i]].reshape(locals[localIndexOf[i]].numel()).view(lo[me] + a, l)
                            : staging.view(remoteIndexOf[i] * cap, l);
                }
                List<Tensor> into = new ArrayList<>();
                for (Tensor d : destinations) {
                    into.add(d.view(a, l));
                }
                Reductions.reduceInto(backend, size(), sources, 0, l, reduction, into);
            }
        } finally {
            if (staging != null) {
                staging.close();
            }
        }
        return firstIndex + rounds;
    }

    /** Frames a chunk of {@code numel} elements takes at {@code seg} per frame: at least one (an empty one). */
    private static int segments(long numel, long seg) {
        return (int) Math.max(1, (numel + seg - 1) / seg);
    }

    /** Queues a collective of two or more members on {@code stream}: meet locally, {@code body}, meet again. */
    private void collective(CommOp op, Backend.Stream stream, String signature, Tensor mine, DType dtype, long count,
                            Body body) {
        checkOpen();
        bind(stream);
        long seq = issued.incrementAndGet();
        String where = label(op, seq);
        Wire.Frame frame = Wire.Frame.of(op, dtype, seq, count, signature);
        stream.launchHostFunc(() -> guarded(where, () -> {
            long start = System.nanoTime();
            Object[] deposits = meet(new Deposit(signature, mine, 0, 0), where);
            Tensor[] locals = new Tensor[deposits.length];
            for (int l = 0; l < deposits.length; l++) {
                locals[l] = ((Deposit) deposits[l]).buffer;
            }
            body.run(where, frame, start, locals);
            if (local != null) {
                local.barrier(localIndexOf[me], where + " (completion)");
            }
            return null;
        }));
    }

    /** The local members' deposits (index = local index), after checking they issued the same collective. */
    private Object[] meet(Deposit mine, String where) {
        if (local == null) {
            return new Object[] {mine};
        }
        Object[] all = local.exchange(localIndexOf[me], mine, where);
        String first = ((Deposit) all[0]).signature;
        for (Object o : all) {
            if (!((Deposit) o).signature.equals(first)) {
                StringBuilder b = new StringBuilder(where + ": ranks issued different collectives:");
                for (int l = 0; l < all.length; l++) {
                    b.append(" rank ").append(members[localMembers[l]]).append(' ').append(((Deposit) all[l]).signature)
                            .append(l + 1 < all.length ? "," : "");
                }
                throw new CommException(b.toString());
            }
        }
        return all;
    }

    private void runLinks(String where, long start) {
        try {
            links.run(where, start, group.timeout(), () -> group.fate().cause());
        } catch (PeerLinks.LostPeerException e) {
            throw group.lostPeer(where, e);
        }
    }

    /**
     * Runs a collective's body: fails at once if the group was aborted; any failure aborts the
     * group (which tells the other processes why and closes the connections), so no rank waits.
     */
    private <T> T guarded(String where, Supplier<T> body) {
        try {
            group.fate().check(where);
            return body.get();
        } catch (CommException e) {
            group.fate().abort(e);
            throw e;
        } catch (Throwable t) {
            CommException e = new CommException(where + " failed: " + t, t);
            group.fate().abort(LocalCommunicator.rankFailure(members[me], e));
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

    /** A tensor's bytes, taken when the collective is issued (while the tensor is open; its memory is stream-ordered). */
    private static ByteBuffer bytes(Tensor t) {
        return CpuStorage.byteView(t);
    }

    private String label(CommOp op, long seq) {
        return op.label() + " #" + seq + " on '" + name + "' at rank " + members[me] + CommTag.suffix();
    }

    private synchronized void bind(Backend.Stream s) {
        if (s == null) {
            throw new IllegalArgumentException("communicator '" + name + "': a collective needs a stream");
        }
        if (stream == null) {
            stream = s;
        } else if (stream != s) {
            throw new IllegalArgumentException("communicator '" + name + "' at rank " + members[me]
                    + " runs its collectives on stream '" + stream.name() + "', not '" + s.name()
                    + "': split() a communicator for each stream that issues collectives");
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("communicator '" + name + "' at rank " + members[me] + " is closed");
        }
    }

    private void record(CommOp op, long fullBytes, int root) {
        counters.record(op, op.sentBytes(fullBytes, size(), me, root), op.receivedBytes(fullBytes, size(), me, root));
    }

    /** How many of this rank's peers in other processes it reaches through shared memory (the rest over TCP). */
    int sharedMemoryPeers() {
        return links.sharedMemoryLinks();
    }

    @Override
    public String toString() {
        return "TcpCommunicator('" + name + "', rank " + members[me] + ", member " + me + " of " + size() + ")";
    }
}
