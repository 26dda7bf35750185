// A rank's GPU as its NCCL communicator sees it: the CUDA backend, through CudaInterop.
package org.fsdp4j.nccl;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.cuda.CudaInterop;

final class CudaNcclDevice implements NcclDevice {

    private final Backend backend;
    private Tensor scratch;   // (1) F32, made on first use

    CudaNcclDevice(Backend backend) {
        CudaInterop.deviceIndex(backend);   // fails unless it is a CUDA backend
        this.backend = backend;
    }

    @Override
    public String name() {
        return backend.device().toString();
    }

    @Override
    public long address(Tensor t) {
        return CudaInterop.address(t);
    }

    @Override
    public long stream(Backend.Stream stream) {
        return CudaInterop.streamHandle(stream).address();
    }

    @Override
    public void scale(Tensor t, float alpha, Backend.Stream stream) {
        try (Backend.StreamScope on = backend.onStream(stream)) {
            backend.scale(t, alpha);
        }
    }

    @Override
    public void makeCurrent() {
        CudaInterop.makeCurrent(backend);
    }

    @Override
    public synchronized long scratch() {
        if (scratch == null) {
            scratch = backend.zeros(DType.F32, MemoryCategory.WORKSPACE, 1);
        }
        return CudaInterop.address(scratch);
    }

    @Override
    public NcclDevice sibling() {
        return new CudaNcclDevice(backend);
    }

    @Override
    public synchronized void close() {
        if (scratch != null) {
            scratch.close();
            scratch = null;
        }
    }
}
