// Device memory behind a Tensor: one block of the caching allocator. Closing it returns the
// block to the allocator (never to cudaFree directly) and the bytes to the MemoryTracker; other
// streams that used it (recordStream) keep it from reuse until they are done.
package org.fsdp4j.cuda;

import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Storage;

final class CudaStorage extends Storage implements DeviceAddressable {

    private final CachingAllocator.Block block;
    private final CudaBackend owner;
    private final java.util.Set<CudaStream> users = new java.util.LinkedHashSet<>();   // recordStream'd, not the block's own

    CudaStorage(CudaBackend owner, CachingAllocator.Block block, long numBytes, MemoryCategory category,
                MemoryTracker tracker) {
        super(owner.device(), numBytes, category, tracker);
        this.owner = owner;
        this.block = block;
    }

    @Override
    public long address() {
        checkOpen();
        return block.address();
    }

    CudaBackend owner() {
        return owner;
    }

    /** Also used by {@code stream}: see Backend.recordStream. */
    void recordStream(CudaStream stream) {
        checkOpen();
        if (stream != block.stream()) {
            synchronized (users) {
                users.add(stream);
            }
        }
    }

    @Override
    protected void release() {
        java.util.List<CudaStream> others;
        synchronized (users) {
            others = java.util.List.copyOf(users);
        }
        owner.releaseBlock(block, others);
    }
}
