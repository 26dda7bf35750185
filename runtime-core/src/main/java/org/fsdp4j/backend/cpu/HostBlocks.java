// Where a CPU backend's memory comes from: malloc for an ordinary host backend, or page-locked
// memory that a GPU's copy engines reach directly (the host backend that holds offloaded state
// for CUDA ranks, CudaBackendProvider.createHost). The CPU allocator caches and orders the
// blocks either way.
package org.fsdp4j.backend.cpu;

import org.bytedeco.javacpp.Pointer;

public interface HostBlocks {

    /** In words, for the backend's name ("pinned"), or null for plain memory. */
    String name();

    /** numBytes (at least 1) of host memory, or null when there is none left. */
    Pointer allocate(long numBytes);

    /** Gives back a block {@link #allocate} returned. */
    void free(Pointer block);

    /** malloc and free. */
    HostBlocks MALLOC = new HostBlocks() {
        @Override
        public String name() {
            return null;
        }

        @Override
        public Pointer allocate(long numBytes) {
            return Pointer.malloc(Math.max(1, numBytes));   // malloc(0) may return null
        }

        @Override
        public void free(Pointer block) {
            Pointer.free(block);
        }
    };
}
