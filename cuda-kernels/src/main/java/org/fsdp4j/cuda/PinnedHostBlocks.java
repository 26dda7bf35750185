// Page-locked host memory for the CPU backend that holds a GPU rank's offloaded state: the GPU's
// copy engines read and write it directly, so a copy between it and the device is a real
// asynchronous DMA (pageable memory would be staged, and copies would wait).
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaErrorMemoryAllocation;
import static org.bytedeco.cuda.global.cudart.cudaFreeHost;
import static org.bytedeco.cuda.global.cudart.cudaGetLastError;
import static org.bytedeco.cuda.global.cudart.cudaMallocHost;

import org.bytedeco.javacpp.Pointer;
import org.fsdp4j.backend.cpu.HostBlocks;

final class PinnedHostBlocks implements HostBlocks {

    private final int device;   // whose context the memory is pinned for (the calling thread's current one)

    PinnedHostBlocks(int device) {
        this.device = device;
    }

    @Override
    public String name() {
        return "pinned";
    }

    @Override
    public Pointer allocate(long numBytes) {
        Pointer p = new Pointer();
        int rc = cudaMallocHost(p, Math.max(1, numBytes));
        if (rc == cudaErrorMemoryAllocation) {
            cudaGetLastError();   // clear it: the caller reports the failure as host memory running out
            return null;
        }
        CudaCheck.check(rc, "cudaMallocHost(" + numBytes + " bytes)", device);
        return p;
    }

    @Override
    public void free(Pointer block) {
        CudaCheck.check(cudaFreeHost(block), "cudaFreeHost", device);
    }
}
