// Page-locked host buffers that copies between host and device stage through, so each
// cudaMemcpyAsync is a real DMA. An upload takes a buffer whose previous copy has completed (its
// event says so), or pins a new one, and records an event after its copy: copyFromHost never
// blocks the host. A download holds its buffer until the host has read it (it waits for the copy
// anyway). In the steady state (the same copies every step) no new buffer is pinned.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaFreeHost;
import static org.bytedeco.cuda.global.cudart.cudaMallocHost;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

final class PinnedStaging implements AutoCloseable {

    private static final long MIN_BYTES = 1L << 16;

    /** One pinned buffer, whether a lease holds it, and the event after the last copy out of it. */
    private static final class Slot {
        final Pointer host;
        final long capacityBytes;
        boolean held;
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

    /**
     * A free buffer of at least {@code numBytes}: for an upload fill it, queue the copy out of it,
     * then call copied(); for a download queue the copy into it, wait, read it, then close().
     */
    synchronized Lease take(long numBytes) {
        if (closed) {
            throw new IllegalStateException("pinned staging of cuda:" + device + " is closed");
        }
        for (Slot s : slots) {
            if (!s.held && s.capacityBytes >= numBytes && (s.lastCopy == null || s.lastCopy.isDone())) {
                s.lastCopy = null;
                s.held = true;
                return new Lease(s);
            }
        }
        long size = Math.max(MIN_BYTES, Long.highestOneBit(Math.max(1, numBytes - 1)) << 1);
        Pointer p = new Pointer();
        CudaCheck.check(cudaMallocHost(p, size), "cudaMallocHost(" + size + " bytes)", device);
        Slot s = new Slot(p, size);
        s.held = true;
        slots.add(s);
        return new Lease(s);
    }

    /** Buffers pinned so far. */
    synchronized int pinnedBuffers() {
        return slots.size();
    }

    /** A buffer taken for one copy. */
    final class Lease implements AutoCloseable {
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
                slot.held = false;
            }
        }

        /** The host has read what was copied into it: the buffer is free again. */
        @Override
        public void close() {
            synchronized (PinnedStaging.this) {
                slot.held = false;
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
