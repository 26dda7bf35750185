// Page-locked host buffers that host→device copies stage through without waiting: each upload
// takes a buffer whose previous copy has completed (its event says so), or pins a new one, and
// records an event after its cudaMemcpyAsync. So copyFromHost never blocks the host, and in the
// steady state (the same uploads every step) no new buffer is pinned.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaFreeHost;
import static org.bytedeco.cuda.global.cudart.cudaMallocHost;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

final class PinnedStaging implements AutoCloseable {

    private static final long MIN_BYTES = 1L << 16;

    /** One pinned buffer and the event after the last copy out of it (null before its first use). */
    private static final class Slot {
        final Pointer host;
        final long capacityBytes;
        CudaEvent lastCopy;

        Slot(Pointer host, long capacityBytes) {
            this.host = host;
            this.capacityBytes = capacityBytes;
        }
    }

    private final int device;
    private final List<Slot> slots = new ArrayList<>();
    private boolean closed;

    PinnedStaging(int device) {
        this.device = device;
    }

    /** A free buffer of at least {@code numBytes}: fill it, copy out of it, then call copied(). */
    synchronized Lease take(long numBytes) {
        if (closed) {
            throw new IllegalStateException("pinned staging of cuda:" + device + " is closed");
        }
        for (Slot s : slots) {
            if (s.capacityBytes >= numBytes && (s.lastCopy == null || s.lastCopy.isDone())) {
                s.lastCopy = null;
                return new Lease(s);
            }
        }
        long size = Math.max(MIN_BYTES, Long.highestOneBit(Math.max(1, numBytes - 1)) << 1);
        Pointer p = new Pointer();
        CudaCheck.check(cudaMallocHost(p, size), "cudaMallocHost(" + size + " bytes)", device);
        Slot s = new Slot(p, size);
        slots.add(s);
        return new Lease(s);
    }

    /** Buffers pinned so far. */
    synchronized int pinnedBuffers() {
        return slots.size();
    }

    /** A buffer taken for one upload. */
    final class Lease {
        private final Slot slot;

        private Lease(Slot slot) {
            this.slot = slot;
        }

        BytePointer bytes() {
            return new BytePointer(slot.host).capacity(slot.capacityBytes).limit(slot.capacityBytes);
        }

        /** The copy out of it is queued on {@code stream}: the buffer is free again once that copy is done. */
        void copied(CudaStream stream) {
            synchronized (PinnedStaging.this) {
                slot.lastCopy = stream.record();
            }
        }
    }

    /** Frees every buffer; the caller has synchronised the device. Idempotent. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            for (Slot s : slots) {
                CudaCheck.check(cudaFreeHost(s.host), "cudaFreeHost", device);
            }
            slots.clear();
        }
    }
}
