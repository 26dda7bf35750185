// One named CUDA stream (non-blocking with respect to the legacy default stream). Names say
// why a stream exists: "compute", "all-gather", "reduce-scatter" (docs/ARCHITECTURE.md, "Streams
// and events"). Work crosses streams only through events (record / waitFor).
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaStreamCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaStreamDestroy;
import static org.bytedeco.cuda.global.cudart.cudaStreamNonBlocking;
import static org.bytedeco.cuda.global.cudart.cudaStreamSynchronize;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.fsdp4j.backend.Backend;

public final class CudaStream implements Backend.Stream {

    private final String name;
    private final int device;
    private final CUstream_st handle = new CUstream_st();
    private final Consumer<CudaStream> beforeDestroy;
    private final AtomicLong hostSyncs;              // the owning backend's counter
    private volatile Throwable hostFailure;          // the first failure of a host function on this stream
    private volatile boolean closed;
    private final GpuOpTimes.Marks opMarks = new GpuOpTimes.Marks();   // used only under -Dfsdp4j.opTimes=true

    /**
     * Creates the stream on the calling thread's current device, which must be {@code device}.
     * {@code beforeDestroy} lets the owner release what it keeps per stream (cuBLAS handle, cache).
     */
    CudaStream(String name, int device, Consumer<CudaStream> beforeDestroy, AtomicLong hostSyncs) {
        this.name = name;
        this.device = device;
        this.beforeDestroy = beforeDestroy;
        this.hostSyncs = hostSyncs;
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

    GpuOpTimes.Marks opMarks() {
        return opMarks;
    }

    boolean isClosed() {
        return closed;
    }

    @Override
    public CudaEvent record() {
        return CudaEvent.record(this, hostSyncs);
    }

    /**
     * cudaStreamWaitEvent for a CUDA event; another backend's event (the host's optimizer under
     * offload) is waited for by a host function that blocks on it, which holds this stream there.
     */
    @Override
    public void waitFor(Backend.Event event) {
        if (event instanceof CudaEvent e) {
            e.waitOn(this);
        } else {
            launchHostFunc(event::block);
        }
    }

    /**
     * cudaLaunchHostFunc: fn runs on a CUDA thread once the work before it is done, and the work
     * after it waits for it. It must not call CUDA. CUDA cannot fail a stream from a host
     * function, so a failure of fn is kept and rethrown by this stream's next synchronize().
     */
    @Override
    public void launchHostFunc(Runnable fn) {
        HostFunctions.launch(this, () -> {
            try {
                fn.run();
            } catch (Throwable t) {
                synchronized (this) {
                    if (hostFailure == null) {
                        hostFailure = t;
                    }
                }
            }
        });
    }

    /** Blocks the host until the work queued so far is done (a host synchronisation). */
    @Override
    public void synchronize() {
        hostSyncs.incrementAndGet();
        drain();
        if (GpuOpTimes.ENABLED) {
            GpuOpTimes.GLOBAL.afterHostWait(this);
        }
    }

    /** As synchronize, without counting: for teardown, not for the step. */
    void drain() {
        CudaCheck.check(cudaStreamSynchronize(handle()), "cudaStreamSynchronize(" + name + ")", device);
        Throwable t = hostFailure;
        if (t instanceof RuntimeException re) {
            throw re;
        }
        if (t != null) {
            throw new IllegalStateException("a host function on " + this + " failed: " + t, t);
        }
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            beforeDestroy.accept(this);
            if (GpuOpTimes.ENABLED) {
                GpuOpTimes.GLOBAL.flush(this);
            }
            closed = true;
        }
        CudaCheck.check(cudaStreamDestroy(handle), "cudaStreamDestroy(" + name + ")", device);
    }

    @Override
    public String toString() {
        return "stream " + name + " on cuda:" + device;
    }
}
