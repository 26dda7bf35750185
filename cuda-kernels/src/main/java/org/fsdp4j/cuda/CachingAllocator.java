// Device memory for one GPU, cached like PyTorch's allocator so the training loop does no
// cudaMalloc/cudaFree in the steady state: sizes round up to a size class, freed blocks go
// to a free list of the stream they were allocated on, and the next request of that class
// on that stream reuses one. Work on other streams is ordered before reuse by an event
// (see free). Live bytes per category are reported by CudaStorage to the MemoryTracker;
// reserved bytes (what cudaMalloc holds, in use or cached) are reported here.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaErrorMemoryAllocation;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaGetLastError;
import static org.bytedeco.cuda.global.cudart.cudaMalloc;

import java.util.ArrayDeque;
import java.util.HashMap;
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

    private final int device;
    private final Map<CudaStream, Map<Long, ArrayDeque<Block>>> cached = new HashMap<>();
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
     * Returns a block to its stream's free list. If the caller's stream is another one, the
     * block's stream first waits for an event recorded on the caller's stream, so reuse on the
     * block's stream cannot overtake work already queued on the caller's.
     */
    synchronized void free(Block b, CudaStream callerStream) {
        inUseBytes -= b.sizeBytes();
        if (closed || b.stream().isClosed()) {
            CudaCheck.check(cudaFree(new DevicePointer(b.address())), "cudaFree", device);
            reservedBytes -= b.sizeBytes();
            return;
        }
        if (callerStream != b.stream()) {
            CudaEvent.record(callerStream).waitOn(b.stream());
        }
        cached.computeIfAbsent(b.stream(), s -> new HashMap<>())
                .computeIfAbsent(b.sizeBytes(), s -> new ArrayDeque<>()).addLast(b);
    }

    synchronized AllocatorStats stats() {
        return new AllocatorStats(inUseBytes, peakInUseBytes, reservedBytes, cudaMallocCalls);
    }

    /** Gives every cached (free) block back to CUDA; cudaFree synchronizes the device. */
    synchronized void releaseCached() {
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

    /** Frees the cache; blocks still in use are freed when their tensors close. */
    @Override
    public synchronized void close() {
        if (!closed) {
            releaseCached();
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
