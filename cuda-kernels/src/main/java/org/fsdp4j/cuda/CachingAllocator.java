// Device memory for one GPU, cached like PyTorch's allocator so the training loop does no
// cudaMalloc/cudaFree in the steady state: sizes round up to a size class, freed blocks go
// to a free list of the stream they were allocated on, and the next request of that class
// on that stream reuses one: work the stream runs later is ordered after the work already
// queued, so reuse needs no wait. A block that other streams used (recordStream) is pending
// until an event recorded on each of them at the free has completed, checked with
// cudaEventQuery at the next allocation (torch's record_stream): no stream is ever made to wait
// for a free. Live bytes per category are reported by CudaStorage to the MemoryTracker;
// reserved bytes (what cudaMalloc holds, in use, cached or pending) are reported here.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaErrorMemoryAllocation;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaGetLastError;
import static org.bytedeco.cuda.global.cudart.cudaMalloc;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.Pointer;

final class CachingAllocator implements AutoCloseable {

    /** Requests up to this size round to SMALL_ROUND_BYTES, larger ones to LARGE_ROUND_BYTES. */
    static final long SMALL_LIMIT_BYTES = 1L << 20;
    static final long SMALL_ROUND_BYTES = 512;
    static final long LARGE_ROUND_BYTES = 2L << 20;

    /** One cudaMalloc'd block; address is 256-byte aligned as cudaMalloc guarantees. */
    record Block(long address, long sizeBytes, CudaStream stream) {
    }

    /** A freed block other streams may still be using: reusable once every event has completed. */
    private record Pending(Block block, List<CudaEvent> users) {
    }

    private final int device;
    private final Map<CudaStream, Map<Long, ArrayDeque<Block>>> cached = new HashMap<>();
    private final List<Pending> pending = new ArrayList<>();
    private long inUseBytes;
    private long peakInUseBytes;
    private long reservedBytes;
    private long cudaMallocCalls;
    private boolean closed;

    CachingAllocator(int device) {
        this.device = device;
    }

    static long sizeClass(long numBytes) {
        long n = Math.max(numBytes, 1);
        long round = n <= SMALL_LIMIT_BYTES ? SMALL_ROUND_BYTES : LARGE_ROUND_BYTES;
        return Math.addExact(n, round - 1) / round * round;
    }

    /** A block of at least {@code numBytes} for use on {@code stream}. */
    synchronized Block allocate(long numBytes, CudaStream stream) {
        if (closed) {
            throw new IllegalStateException("allocator of cuda:" + device + " is closed");
        }
        long size = sizeClass(numBytes);
        reclaimFinished();
        ArrayDeque<Block> list = cached.getOrDefault(stream, Map.of()).get(size);
        Block b = list == null ? null : list.pollLast();
        if (b == null) {
            b = new Block(malloc(size), size, stream);
        }
        inUseBytes += size;
        peakInUseBytes = Math.max(peakInUseBytes, inUseBytes);
        return b;
    }

    /**
     * Takes back a block: onto its stream's free list at once, or, when {@code users} (events
     * recorded at the free on the other streams that used it) are given, once they have all
     * completed.
     */
    synchronized void free(Block b, List<CudaEvent> users) {
        inUseBytes -= b.sizeBytes();
        if (users.isEmpty()) {
            reuse(b);
        } else {
            pending.add(new Pending(b, List.copyOf(users)));
        }
    }

    private void reuse(Block b) {
        if (closed || b.stream().isClosed()) {
            CudaCheck.check(cudaFree(new DevicePointer(b.address())), "cudaFree", device);
            reservedBytes -= b.sizeBytes();
            return;
        }
        cached.computeIfAbsent(b.stream(), s -> new HashMap<>())
                .computeIfAbsent(b.sizeBytes(), s -> new ArrayDeque<>()).addLast(b);
    }

    /** Moves every pending block whose users have finished onto its stream's free list. */
    private void reclaimFinished() {
        for (Iterator<Pending> it = pending.iterator(); it.hasNext(); ) {
            Pending p = it.next();
            if (p.users().stream().allMatch(CudaEvent::isDone)) {
                it.remove();
                reuse(p.block());
            }
        }
    }

    /** Blocks freed while other streams may still use them. */
    synchronized int pendingBlocks() {
        return pending.size();
    }

    synchronized AllocatorStats stats() {
        return new AllocatorStats(inUseBytes, peakInUseBytes, reservedBytes, cudaMallocCalls);
    }

    /** Gives every cached (free) block back to CUDA; cudaFree synchronizes the device. */
    synchronized void releaseCached() {
        reclaimFinished();
        for (CudaStream s : List.copyOf(cached.keySet())) {
            releaseStream(s);
        }
    }

    /** Gives the cached blocks of a stream that is about to be destroyed back to CUDA. */
    synchronized void releaseStream(CudaStream stream) {
        Map<Long, ArrayDeque<Block>> bySize = cached.remove(stream);
        if (bySize != null) {
            for (ArrayDeque<Block> list : bySize.values()) {
                for (Block b : list) {
                    CudaCheck.check(cudaFree(new DevicePointer(b.address())), "cudaFree", device);
                    reservedBytes -= b.sizeBytes();
                }
            }
        }
    }

    /** Frees the cache and the pending blocks (the streams are done); blocks still in use are freed when their tensors close. */
    @Override
    public synchronized void close() {
        if (!closed) {
            releaseCached();
            for (Pending p : pending) {
                CudaCheck.check(cudaFree(new DevicePointer(p.block().address())), "cudaFree", device);
                reservedBytes -= p.block().sizeBytes();
            }
            pending.clear();
            closed = true;
        }
    }

    private long malloc(long size) {
        Pointer p = new Pointer();
        int rc = cudaMalloc(p, size);
        if (rc == cudaErrorMemoryAllocation) {
            cudaGetLastError();        // clear it, give the cache back, and try once more
            releaseCached();
            rc = cudaMalloc(p, size);
            if (rc == cudaErrorMemoryAllocation) {
                cudaGetLastError();
                throw new CudaException("cudart", "cudaMalloc(" + size + " bytes)", rc, "cudaErrorMemoryAllocation",
                        "out of device memory with " + inUseBytes + " bytes in use and " + reservedBytes
                                + " reserved; lower the batch size or use activation checkpointing", device);
            }
        }
        CudaCheck.check(rc, "cudaMalloc(" + size + " bytes)", device);
        cudaMallocCalls++;
        reservedBytes += size;
        return p.address();
    }
}
