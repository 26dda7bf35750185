// A CUDA event recorded on a stream: the only way work crosses streams. Events are
// handed to the engine with no close() in the Backend contract, so the CUDA handle is
// destroyed by a Cleaner once the Java object is unreachable (destroying a pending event is
// legal: CUDA releases it when the work completes).
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaEventCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaEventDestroy;
import static org.bytedeco.cuda.global.cudart.cudaErrorNotReady;
import static org.bytedeco.cuda.global.cudart.cudaEventDisableTiming;
import static org.bytedeco.cuda.global.cudart.cudaEventQuery;
import static org.bytedeco.cuda.global.cudart.cudaEventRecord;
import static org.bytedeco.cuda.global.cudart.cudaSuccess;
import static org.bytedeco.cuda.global.cudart.cudaEventSynchronize;
import static org.bytedeco.cuda.global.cudart.cudaSetDevice;
import static org.bytedeco.cuda.global.cudart.cudaStreamWaitEvent;

import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicLong;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.fsdp4j.backend.Backend;

public final class CudaEvent implements Backend.Event {

    private static final Cleaner CLEANER = Cleaner.create();

    private final CUevent_st handle = new CUevent_st();
    private final int device;
    private final AtomicLong hostSyncs;   // the recording backend's counter

    private CudaEvent(int device, AtomicLong hostSyncs) {
        this.device = device;
        this.hostSyncs = hostSyncs;
        CudaCheck.check(cudaEventCreateWithFlags(handle, cudaEventDisableTiming),
                "cudaEventCreateWithFlags", device);
        long address = handle.address();
        CLEANER.register(this, () -> destroy(address, device));
    }

    /** Records a new event at the current end of {@code stream}. */
    static CudaEvent record(CudaStream stream, AtomicLong hostSyncs) {
        CudaEvent e = new CudaEvent(stream.device(), hostSyncs);
        CudaCheck.check(cudaEventRecord(e.handle, stream.handle()), "cudaEventRecord(" + stream.name() + ")",
                e.device);
        return e;
    }

    /** Makes {@code stream} wait for this event without blocking the host. */
    void waitOn(CudaStream stream) {
        CudaCheck.check(cudaStreamWaitEvent(stream.handle(), handle, 0), "cudaStreamWaitEvent(" + stream.name() + ")",
                device);
    }

    @Override
    public void synchronize() {
        hostSyncs.incrementAndGet();
        CudaCheck.check(cudaEventSynchronize(handle), "cudaEventSynchronize", device);
    }

    @Override
    public void block() {
        CudaCheck.check(cudaEventSynchronize(handle), "cudaEventSynchronize", device);
    }

    /** cudaEventQuery: done (true), not yet (false), or the error it reports. */
    @Override
    public boolean isDone() {
        int rc = cudaEventQuery(handle);
        if (rc == cudaErrorNotReady) {
            return false;
        }
        CudaCheck.check(rc, "cudaEventQuery", device);
        return rc == cudaSuccess;
    }

    private static void destroy(long address, int device) {
        CUevent_st h = new CUevent_st(new DevicePointer(address));
        cudaSetDevice(device);
        cudaEventDestroy(h);   // nothing can be reported from a Cleaner thread
    }
}
