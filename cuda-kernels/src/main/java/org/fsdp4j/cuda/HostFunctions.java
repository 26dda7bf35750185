// cudaLaunchHostFunc for Java code: one native callback (a JavaCPP FunctionPointer, kept alive
// for the JVM's life) that runs the Runnable registered under the id CUDA hands back, so no
// per-call native thunk is made and nothing is freed while CUDA may still call it.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaLaunchHostFunc;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.bytedeco.cuda.cudart.cudaHostFn_t;
import org.bytedeco.javacpp.Pointer;

final class HostFunctions {

    private static final Map<Long, Runnable> PENDING = new ConcurrentHashMap<>();
    private static final AtomicLong IDS = new AtomicLong(1);

    /** Runs the Runnable whose id CUDA passes back as the user-data pointer's address. */
    private static final class Dispatch extends cudaHostFn_t {
        @Override
        public void call(Pointer userData) {
            Runnable r = PENDING.remove(userData.address());
            if (r != null) {
                r.run();
            }
        }
    }

    private static final Dispatch DISPATCH = new Dispatch();

    private HostFunctions() {
    }

    /** Queues {@code fn} on {@code stream} (it must catch its own failures: CUDA cannot report them). */
    static void launch(CudaStream stream, Runnable fn) {
        long id = IDS.getAndIncrement();
        PENDING.put(id, fn);
        int rc = cudaLaunchHostFunc(stream.handle(), DISPATCH, new DevicePointer(id));
        if (rc != 0) {
            PENDING.remove(id);
        }
        CudaCheck.check(rc, "cudaLaunchHostFunc(" + stream.name() + ")", stream.device());
    }
}
