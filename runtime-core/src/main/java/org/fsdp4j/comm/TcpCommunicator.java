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
//
// Where every pair of members in different processes talks through shared-memory rings (all on
// one host; agreed by every member when the communicator is made), the group can also hold one
// buffer (sharedBuffer): member 0 writes a /dev/shm file for it, each other process maps it once
// for its members, and an all-gather whose output is that buffer, from its own chunks, only
// meets (an empty frame each way, as a barrier): every rank then reads the others' chunks in
// place, as in-process ranks do.
//
// What every host-side communicator does alike (checks, labels, a group of one, the local
// meeting, the failure policy) is HostCommunicator's; this file is the exchange between processes.
package org.fsdp4j.comm;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.api.Storage;

final class TcpCommunicator extends HostCommunicator {

    /** A shared buffer's file: a header page (the nonce at 0), then the buffer, page-aligned. */
    private static final int SHARED_HEADER_BYTES = 4096;
    /** Member 0's offer of a shared buffer: nonce (0: none), path length, path. */
    private static final int OFFER_BYTES = 512;

    /** A collective's work once the local members have met: {@code locals} are their buffers, by local index. */
    @FunctionalInterface
    private interface Exchange {
        void run(String where, Wire.Frame frame, long startNanos, Tensor[] locals);
    }

    private final TcpGroup group;
    private final String key;               // names this communicator's connections in every process
    private final int[] members;            // member i is world rank members[i]
    private final int me;
    private final int[] localMembers;       // member indices in this process, ascending
    private final int[] localIndexOf;       // member → index in localMembers, or −1
    private final int[] remoteMembers;      // member indices in other processes, ascending
    private final int[] remoteIndexOf;      // member → index in remoteMembers, or −1
    private final Rendezvous local;         // the members in this process; null when this rank is alone here
    private final PeerLinks links;
    private final boolean sharesMemory;     // every member's remote pairs are rings (or it has none)
    private final Set<Storage> sharedHere = Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));
    private final AtomicLong gathersInPlace = new AtomicLong();   // all-gathers that only met (tests read it)

    /**
     * Member {@code me} of the group of world ranks {@code members}; connects to every member in
     * another process (blocking, up to the group's timeout). Every member builds its own at
     * about the same time (a split, or the world's creation).
     */
    TcpCommunicator(TcpGroup group, String key, String name, int[] members, int me, Backend backend) {
        super(name, me, members.length, members[me], group.fate(), backend);
        this.group = group;
        this.key = key;
        this.members = members.clone();
        this.me = me;
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
            String where = "communicator '" + name + "' at " + group.describe(members[me]);
            String told = group.fate().isAborted() ? null : group.failureInStore(java.time.Duration.ofSeconds(3)).orElse(null);
            CommException why = group.fate().isAborted() ? new CommException(group.fate().cause().getMessage(), e)
                    : told != null ? new CommException(told + ", while " + where + " connected to its peers", e)
                    : new CommException(where + " cannot reach its peers: " + e.getMessage(), e);
            group.fate().abort(why);
            throw why;
        }
        this.links = new PeerLinks(channels, pipes, q -> group.describe(members[q]));
        group.register(this);
        this.sharesMemory = agreeOnSharedMemory();
    }

    /**
     * Whether every member reaches every member of another process through rings (a flag from
     * each, local members through the rendezvous): one rank's pairs may differ from another's,
     * and a shared buffer needs all of them. Collective, right after the connections are made.
     */
    private boolean agreeOnSharedMemory() {
        boolean mine = remoteMembers.length == 0 || links.sharedMemoryLinks() == remoteMembers.length;
        String where = "set-up of communicator '" + name() + "' at rank " + members[me] + " (shared memory)";
        try {
            long start = System.nanoTime();
            boolean all = mine;
            if (local != null) {
                for (Object flag : local.exchange(localIndexOf[me], mine, where)) {
                    all &= (Boolean) flag;
                }
            }
            Wire.Frame frame = new Wire.Frame(Wire.SHARE_INFO, -1, 0, 0, 0, 0, 1);
            ByteBuffer[] theirs = new ByteBuffer[size()];
            for (int q : remoteMembers) {
                links.send(q, frame, ByteBuffer.wrap(new byte[] {(byte) (mine ? 1 : 0)}));
                theirs[q] = ByteBuffer.allocate(1);
                links.receive(q, frame, theirs[q]);
            }
            runLinks(where, start);
            for (int q : remoteMembers) {
                all &= theirs[q].get(0) == 1;
            }
            return all;
        } catch (RuntimeException e) {
            group.fate().abort(e instanceof CommException ce ? ce : rankFailure(members[me], e));
            group.unregister(this);
            links.close();
            throw e;
        }
    }

    // ------------------------------------------------------------------ collectives

    @Override
    protected void allGatherAmong(Tensor input, Tensor output, boolean inPlace, String signature,
                                  Backend.Stream stream) {
        long n = input.numel();
        if (inPlace && sharedHere.contains(output.storage())) {
            // every member's chunk already is in this memory: meet, and read them in place
            gathersInPlace.incrementAndGet();
            collective(CommOp.ALL_GATHER, stream, signature + " in shared memory at byte " + output.byteOffset(), input,
                    input.dtype(), n, (where, frame, start, locals) -> {
                        for (int q : remoteMembers) {
                            links.send(q, frame, ByteBuffer.allocate(0));
                            links.receive(q, frame, ByteBuffer.allocate(0));
                        }
                        runLinks(where, start);
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
    }

    @Override
    protected void reduceScatterAmong(Tensor input, Tensor output, Reduction reduction, String signature,
                                      Backend.Stream stream) {
        long n = output.numel();
        ByteBuffer in = bytes(input);
        collective(CommOp.REDUCE_SCATTER, stream, signature, input, input.dtype(), input.numel(),
                (where, frame, start, locals) -> {
                    long[] lo = new long[size()];
                    long[] len = new long[size()];
                    for (int i = 0; i < size(); i++) {
                        lo[i] = i * n;
                        len[i] = n;
                    }
                    reduceMyChunk(where, frame, start, locals, in, lo, len, reduction, List.of(output.reshape(n)), 0);
                });
    }

    @Override
    protected void allReduceAmong(Tensor buffer, Reduction reduction, String signature, Backend.Stream stream) {
        long total = buffer.numel();
        DType dtype = buffer.dtype();
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
    }

    @Override
    protected void broadcastAmong(Tensor buffer, int root, String signature, Backend.Stream stream) {
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
    }

    @Override
    protected void barrierAmong(Backend.Stream stream) {
        collective(CommOp.BARRIER, stream, "barrier()", null, null, 0, (where, frame, start, locals) -> {
            for (int q : remoteMembers) {
                links.send(q, frame, ByteBuffer.allocate(0));
                links.receive(q, frame, ByteBuffer.allocate(0));
            }
            runLinks(where, start);
        });
    }

    /** The local members meet; every member trades colour and key with each member in another process. */
    @Override
    protected Communicator splitAmong(int color, int key, String subName, long seq, String where) {
        long start = System.nanoTime();
        Object[] deposits = meet(local, localIndexOf[me], Deposit.split(color, key), where);
        int[] colors = new int[size()];
        int[] keys = new int[size()];
        for (int l = 0; l < localMembers.length; l++) {
            colors[localMembers[l]] = ((Deposit) deposits[l]).color();
            keys[localMembers[l]] = ((Deposit) deposits[l]).key();
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
        return new TcpCommunicator(group, this.key + "#" + seq + ":" + color, name() + "/" + subName, subRanks,
                sub.indexOf(me), backend);
    }

    @Override
    public boolean sharesMemory() {
        return sharesMemory;
    }

    /** Releases the connections once the collectives queued on its stream have run. */
    @Override
    protected void closed(Backend.Stream s) {
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

    /** The local members' meeting is part of the exchange between processes: its failure is the group's. */
    @Override
    protected RuntimeException differentCollectives(String message) {
        return new CommException(message);
    }

    @Override
    protected String failureText(Throwable t) {
        return String.valueOf(t);
    }

    // ------------------------------------------------------------------ machinery

    /**
     * sharedBuffer's meeting. Members in one process: the first allocates it as the in-process
     * group does. Otherwise member 0 writes a /dev/shm file for it and offers its path and nonce
     * to every member of another process; the first member of each process maps it (if the nonce
     * matches) for the process; every such member answers; member 0 unlinks the file and tells
     * all whether every process has it. Null on every rank when one has not (a full /dev/shm).
     */
    @Override
    protected SharedBuffer shareAmong(String where, long seq, String signature, DType dtype, MemoryCategory category,
                                      long numel) {
        long start = System.nanoTime();
        long numBytes = Math.multiplyExact(numel, (long) dtype.byteSize());
        Object[] deposits = meet(local, localIndexOf[me], Deposit.charged(signature, backend.memory()), where);
        List<MemoryTracker> charged = trackers(deposits);
        boolean first = localMembers[0] == me;       // this process's first member sets its part up
        Tensor owner = null;
        if (remoteMembers.length == 0) {
            if (first) {
                owner = backend.allocateShared(dtype, category, charged, numel);
            }
        } else {
            MappedByteBuffer map = mapShared(where, seq, signature, numBytes, start, first);
            if (first && map != null) {
                Runnable unmap = () -> ShmFile.unmap(map);
                try {
                    owner = backend.overMapping(map.slice(SHARED_HEADER_BYTES, (int) numBytes), unmap, dtype, category,
                            charged, size(), numel);
                } catch (RuntimeException | Error e) {
                    unmap.run();
                    throw e;
                }
            }
        }
        SharedBuffer handle = handOut(local, localIndexOf[me], owner, where);
        if (handle != null) {
            sharedHere.add(handle.tensor().rawStorage());   // its all-gathers only meet (allGather)
        }
        return handle;
    }

    /**
     * The shared buffer's file, set up across the processes (see shareAmong): this process's
     * mapping for its first member ({@code first}), null for the others, and null for every rank
     * where some process could not have it.
     */
    private MappedByteBuffer mapShared(String where, long seq, String signature, long numBytes, long start,
                                       boolean first) {
        long fileBytes = SHARED_HEADER_BYTES + numBytes;
        Wire.Frame offerFrame = new Wire.Frame(Wire.SHARE_INFO, -1, seq, numBytes, signature.hashCode(), 0, OFFER_BYTES);
        Wire.Frame answerFrame = offerFrame.frame(1, 1);
        Wire.Frame verdictFrame = offerFrame.frame(2, 1);
        Path path = null;
        MappedByteBuffer map = null;
        boolean ok = false;
        try {
            // 1: member 0 offers the file to every member of another process
            ByteBuffer offer = ByteBuffer.allocate(OFFER_BYTES);
            if (me == 0) {
                if (fileBytes <= ShmFile.MAX_BYTES && ShmFile.available()) {
                    try {
                        ShmFile.Created file = ShmFile.create(".shared", fileBytes);
                        path = file.path();
                        map = file.map();
                    } catch (IOException e) {
                        map = null;                    // no room: every rank keeps its own buffers
                    }
                }
                byte[] name = path == null ? new byte[0] : path.toString().getBytes(StandardCharsets.UTF_8);
                long nonce = map == null || name.length > OFFER_BYTES - 12 ? 0 : ShmFile.nonce();
                if (map != null) {
                    map.putLong(0, nonce);
                }
                offer.putLong(nonce).putInt(nonce == 0 ? 0 : name.length).put(nonce == 0 ? new byte[0] : name).clear();
                for (int q : remoteMembers) {
                    links.send(q, offerFrame, offer.duplicate());
                }
            } else if (localIndexOf[0] < 0) {
                links.receive(0, offerFrame, offer);
            }
            runLinks(where, start);
            // the first member of each other process maps it, for the process
            if (me != 0 && localIndexOf[0] < 0 && first) {
                map = openShared(offer, fileBytes);
            }
            boolean mapped = map != null;
            Object[] maps = local == null ? new Object[] {mapped}
                    : local.exchange(localIndexOf[me], mapped, where + " (map)");
            boolean here = (Boolean) maps[0];          // this process's first member has it
            // 2: every member of another process says whether its process has it
            ByteBuffer[] answers = new ByteBuffer[size()];
            if (me == 0) {
                for (int q : remoteMembers) {
                    answers[q] = ByteBuffer.allocate(1);
                    links.receive(q, answerFrame, answers[q]);
                }
            } else if (localIndexOf[0] < 0) {
                links.send(0, answerFrame, ByteBuffer.wrap(new byte[] {(byte) (here ? 1 : 0)}));
            }
            runLinks(where, start);
            // 3: member 0 tells every member of another process whether all have it
            ByteBuffer verdict = ByteBuffer.allocate(1);
            if (me == 0) {
                ShmFile.delete(path);                 // mapped by every process that will have it
                path = null;
                boolean all = map != null;
                for (int q : remoteMembers) {
                    all &= answers[q].get(0) == 1;
                }
                verdict.put(0, (byte) (all ? 1 : 0));
                for (int q : remoteMembers) {
                    links.send(q, verdictFrame, verdict.duplicate());
                }
            } else if (localIndexOf[0] < 0) {
                links.receive(0, verdictFrame, verdict);
            }
            runLinks(where, start);
            // member 0's process hears it from member 0 (its first), the others' members each heard it
            Object[] verdicts = local == null ? new Object[] {verdict.get(0) == 1}
                    : local.exchange(localIndexOf[me], verdict.get(0) == 1, where + " (verdict)");
            ok = (Boolean) verdicts[0];
            return ok && first ? map : null;
        } finally {
            ShmFile.delete(path);
            if (!ok && map != null) {
                ShmFile.unmap(map);                   // some process has none: nobody uses it
            }
        }
    }

    /** Maps the file {@code offer} names if it is member 0's (its nonce is there); null where it cannot. */
    private static MappedByteBuffer openShared(ByteBuffer offer, long fileBytes) {
        int length = offer.getInt(8);
        if (length <= 0 || length > OFFER_BYTES - 12) {
            return null;
        }
        byte[] name = new byte[length];
        offer.get(12, name);
        try {
            return ShmFile.openIfOffered(Path.of(new String(name, StandardCharsets.UTF_8)), fileBytes, 0,
                    offer.getLong(0));
        } catch (RuntimeException e) {
            return null;                             // not a path at all
        }
    }

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

    /**
     * Queues a collective of two or more members on {@code stream}: the local members meet, each
     * runs {@code exchange} (with the collective's frame header), and they meet again.
     */
    private void collective(CommOp op, Backend.Stream stream, String signature, Tensor mine, DType dtype, long count,
                            Exchange exchange) {
        issue(op, stream, (seq, where) -> {
            Wire.Frame frame = Wire.Frame.of(op, dtype, seq, count, signature);
            inHostFunction(stream, where, local, localIndexOf[me], Deposit.of(signature, mine),
                    (w, start, locals) -> exchange.run(w, frame, start, locals));
        });
    }

    private void runLinks(String where, long start) {
        try {
            links.run(where, start, group.timeout(), () -> group.fate().cause());
        } catch (PeerLinks.LostPeerException e) {
            throw group.lostPeer(where, e);
        }
    }

    /** A tensor's bytes, taken when the collective is issued (while the tensor is open; its memory is stream-ordered). */
    private ByteBuffer bytes(Tensor t) {
        return backend.hostBytes(t);
    }

    /** How many all-gathers this rank issued into a shared buffer from its chunk: they moved nothing. */
    long gathersInPlace() {
        return gathersInPlace.get();
    }

    /** How many of this rank's peers in other processes it reaches through shared memory (the rest over TCP). */
    int sharedMemoryPeers() {
        return links.sharedMemoryLinks();
    }

    @Override
    public String toString() {
        return "TcpCommunicator('" + name() + "', rank " + members[me] + ", member " + me + " of " + size() + ")";
    }
}
