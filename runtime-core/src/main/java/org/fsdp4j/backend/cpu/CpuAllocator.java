// Host memory for one CPU backend, handed out and taken back in stream order as CUDA's caching
// allocator does, because CPU streams run asynchronously too (CpuStream):
// - a block is allocated for a stream (the issuing thread's current one);
// - when its tensor is closed, the block goes back to that stream's free list at once: work the
//   stream runs later (including the next user of the block) is ordered after the work already
//   issued, so reuse is safe without waiting; blocks too small to be worth keeping are freed by
//   the stream itself when it gets there;
// - when other streams were named with recordStream, the block waits (pending) until each of
//   them has done what it was given by the close, and only then is reusable; nobody is made to
//   wait for it (torch's record_stream);
// - work running on a stream (a host function, as the in-process collectives are) that takes a
//   temporary is not issued after anything: it runs at some earlier point of the stream than
//   frees the host has already made. So it never takes a block from the stream's free list (the
//   block may still be read by the very work that runs), only from a list of blocks that such
//   work freed itself, which are free the moment they are given back.
// Keeping freed blocks also spares each step the page faults of fresh mallocs (measured: about a
// quarter of a bench-4x256 step before blocks were reused). Under the debug mode every freed
// block is poisoned (all bits set: NaN in every float dtype, −1 as a token) in stream order
// before it can be reused, and fresh blocks are poisoned too, so reading memory nobody wrote or
// reading it after its reuse shows up as NaN.
package org.fsdp4j.backend.cpu;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.Pointer;

final class CpuAllocator implements AutoCloseable {

    /** glibc's initial mmap threshold: smaller blocks come from malloc's own heap, which reuses them. */
    static final long MIN_CACHED_BYTES = 128 << 10;
    /** The most freed bytes one backend keeps for reuse; beyond it freed blocks go back to malloc. */
    static final long MAX_CACHED_BYTES = 1L << 30;

    /** A block freed by the host while other streams may still use it. */
    private record Pending(Pointer block, long numBytes, CpuStream stream, List<CpuEvent> users) {
    }

    private final boolean poison;
    private final HostBlocks blocks;
    private final Map<CpuStream, Map<Long, ArrayDeque<Pointer>>> free = new HashMap<>();   // stream → numBytes → blocks
    private final Map<Long, ArrayDeque<Pointer>> freedByWork = new HashMap<>();           // numBytes → blocks, free now
    private final List<Pending> pending = new ArrayList<>();
    private long cachedBytes;
    private boolean closed;

    CpuAllocator(boolean poison, HostBlocks blocks) {
        this.poison = poison;
        this.blocks = blocks;
    }

    /**
     * A block of {@code numBytes} (at least 1) for work on {@code stream}, or, when {@code inWork},
     * for the work running on it right now; contents undefined (poisoned in debug).
     */
    synchronized Pointer allocate(long numBytes, CpuStream stream, boolean inWork) {
        if (closed) {
            throw new IllegalStateException("the CPU backend was closed");
        }
        reclaimFinished();
        ArrayDeque<Pointer> cached = inWork ? freedByWork.get(numBytes) : free.getOrDefault(stream, Map.of()).get(numBytes);
        if (cached != null && !cached.isEmpty()) {
            cachedBytes -= numBytes;
            return cached.pop();
        }
        Pointer block = blocks.allocate(numBytes);
        if ((block == null || block.isNull()) && cachedBytes > 0) {
            releaseCached();                                      // the cached blocks may be what is missing
            block = blocks.allocate(numBytes);
        }
        if (block == null || block.isNull()) {
            return null;
        }
        if (poison) {
            Pointer.memset(block, 0xFF, Math.max(1, numBytes));
        }
        return block;
    }

    /**
     * Takes back a block nobody holds any more: allocated for {@code stream}, and also used by
     * {@code users} (events recorded on the other streams named with recordStream at close).
     * {@code inWork}: freed by work running on a stream, which is done with it now.
     */
    synchronized void free(Pointer block, long numBytes, CpuStream stream, List<CpuEvent> users, boolean inWork) {
        if (inWork && users.isEmpty()) {
            if (closed || !keeps(numBytes)) {
                blocks.free(block);
                return;
            }
            if (poison) {
                Pointer.memset(block, 0xFF, Math.max(1, numBytes));
            }
            freedByWork.computeIfAbsent(numBytes, n -> new ArrayDeque<>()).push(block);
            cachedBytes += numBytes;
        } else if (users.isEmpty()) {
            reuse(block, numBytes, stream);
        } else {
            pending.add(new Pending(block, numBytes, stream, List.copyOf(users)));
        }
    }

    /** Bytes kept for reuse (free lists) and bytes waiting for other streams (pending). */
    synchronized long cachedBytes() {
        return cachedBytes;
    }

    synchronized int pendingBlocks() {
        return pending.size();
    }

    private void reclaimFinished() {
        for (Iterator<Pending> it = pending.iterator(); it.hasNext(); ) {
            Pending p = it.next();
            if (p.users.stream().allMatch(CpuEvent::isDone)) {
                it.remove();
                reuse(p.block, p.numBytes, p.stream);
            }
        }
    }

    /** Onto the stream's free list (poisoned first, in stream order), or back to malloc in stream order. */
    private void reuse(Pointer block, long numBytes, CpuStream stream) {
        if (closed || stream.isClosed()) {
            blocks.free(block);     // the stream has finished all its work
            return;
        }
        if (!keeps(numBytes)) {
            stream.execute(() -> blocks.free(block));
            return;
        }
        if (poison) {
            stream.execute(() -> Pointer.memset(block, 0xFF, Math.max(1, numBytes)));
        }
        free.computeIfAbsent(stream, s -> new HashMap<>()).computeIfAbsent(numBytes, n -> new ArrayDeque<>()).push(block);
        cachedBytes += numBytes;
    }

    /** Whether a freed block of this size is kept for reuse (always in debug, so that reuse is poisoned). */
    private boolean keeps(long numBytes) {
        return poison || (numBytes >= MIN_CACHED_BYTES && cachedBytes + numBytes <= MAX_CACHED_BYTES);
    }

    /** Gives every cached block back to malloc (each stream's after that stream's queued work). */
    private void releaseCached() {
        freedByWork.values().forEach(list -> list.forEach(blocks::free));
        freedByWork.clear();
        for (Map.Entry<CpuStream, Map<Long, ArrayDeque<Pointer>>> e : free.entrySet()) {
            CpuStream stream = e.getKey();
            List<Pointer> cachedBlocks = new ArrayList<>();
            e.getValue().values().forEach(cachedBlocks::addAll);
            if (stream.isClosed()) {
                cachedBlocks.forEach(blocks::free);
            } else {
                stream.execute(() -> cachedBlocks.forEach(blocks::free));
            }
        }
        free.clear();
        cachedBytes = 0;
    }

    /** Forgets a stream that is being closed (its work is done): its free list goes back to malloc. */
    synchronized void streamClosed(CpuStream stream) {
        Map<Long, ArrayDeque<Pointer>> bySize = free.remove(stream);
        if (bySize != null) {
            for (Map.Entry<Long, ArrayDeque<Pointer>> e : bySize.entrySet()) {
                cachedBytes -= e.getKey() * e.getValue().size();
                e.getValue().forEach(blocks::free);
            }
        }
    }

    /**
     * Frees everything once the streams are done (the backend closes its streams first); a
     * pending block whose users never finish (a stream that failed and was stopped) is freed too,
     * since nothing runs any more. Idempotent.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (Pending p : pending) {
            blocks.free(p.block);
        }
        pending.clear();
        for (Map<Long, ArrayDeque<Pointer>> bySize : free.values()) {
            bySize.values().forEach(list -> list.forEach(blocks::free));
        }
        free.clear();
        freedByWork.values().forEach(list -> list.forEach(blocks::free));
        freedByWork.clear();
        cachedBytes = 0;
    }
}
