// One named CUDA stream (non-blocking with respect to the legacy default stream). Names say
// why a stream exists: "compute", "all-gather", "reduce-scatter" (DESIGN.md, Streams).
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaStreamCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaStreamDestroy;
import static org.bytedeco.cuda.global.cudart.cudaStreamNonBlocking;
import static org.bytedeco.cuda.global.cudart.cudaStreamSynchronize;

import java.util.function.Consumer;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.fsdp4j.backend.Backend;

public final class CudaStream implements Backend.Stream {

    private final String name;
    private final int device;
    private final CUstream_st handle = new CUstream_st();
    private final Consumer<CudaStream> beforeDestroy;
    private volatile boolean closed;

    /**
     * Creates the stream on the calling thread's current device, which must be {@code device}.
     * {@code beforeDestroy} lets the owner release what it keeps per stream (cuBLAS handle, cache).
     */
    CudaStream(String name, int device, Consumer<CudaStream> beforeDestroy) {
        this.name = name;
        this.device = device;
        this.beforeDestroy = beforeDestroy;
        CudaCheck.check(cudaStreamCreateWithFlags(handle, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags(" + name + ")", device);
    }

    @Override
    public String name() {
        return name;
    }

    int device() {
        return device;
    }

    CUstream_st handle() {
        if (closed) {
            throw new IllegalStateException("stream '" + name + "' on cuda:" + device + " is closed");
        }
        return handle;
    }

    boolean isClosed() {
        return closed;
    }

    /** Blocks the host until the work queued so far on this stream is done. */
    void synchronize() {
        CudaCheck.check(cudaStreamSynchronize(handle()), "cudaStreamSynchronize(" + name + ")", device);
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            beforeDestroy.accept(this);
            closed = true;
        }
        CudaCheck.check(cudaStreamDestroy(handle), "cudaStreamDestroy(" + name + ")", device);
    }

    @Override
    public String toString() {
        return "stream " + name + " on cuda:" + device;
    }
}
