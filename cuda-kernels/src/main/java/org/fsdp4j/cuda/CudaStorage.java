// Device memory behind a Tensor: one block of the caching allocator. Closing it returns the
// block to the allocator (never to cudaFree directly) and the bytes to the MemoryTracker.
package org.fsdp4j.cuda;

import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Storage;

final class CudaStorage extends Storage implements DeviceAddressable {

    private final CachingAllocator.Block block;
    private final CudaBackend owner;

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

    @Override
    protected void release() {
        owner.releaseBlock(block);
    }
}
