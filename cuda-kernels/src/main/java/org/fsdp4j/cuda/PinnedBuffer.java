// Page-locked host memory that host↔device copies stage through, so cudaMemcpyAsync is a real
// DMA and not a hidden synchronous copy. Grows on demand (doubling); one per backend, used
// under its lock.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaFreeHost;
import static org.bytedeco.cuda.global.cudart.cudaMallocHost;

import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

final class PinnedBuffer implements AutoCloseable {

    private static final long MIN_BYTES = 1L << 20;

    private final int device;
    private Pointer host;
    private long capacityBytes;
    private boolean closed;

    PinnedBuffer(int device) {
        this.device = device;
    }

    /** At least {@code numBytes} of pinned memory; valid until the next call or close. */
    synchronized BytePointer atLeast(long numBytes) {
        if (closed) {
            throw new IllegalStateException("pinned buffer of cuda:" + device + " is closed");
        }
        if (numBytes > capacityBytes) {
            free();
            long size = Math.max(MIN_BYTES, Math.max(numBytes, 2 * capacityBytes));
            Pointer p = new Pointer();
            CudaCheck.check(cudaMallocHost(p, size), "cudaMallocHost(" + size + " bytes)", device);
            host = p;
            capacityBytes = size;
        }
        return new BytePointer(host).capacity(capacityBytes).limit(capacityBytes);
    }

    private void free() {
        if (host != null) {
            CudaCheck.check(cudaFreeHost(host), "cudaFreeHost", device);
            host = null;
            capacityBytes = 0;
        }
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            free();
        }
    }
}
