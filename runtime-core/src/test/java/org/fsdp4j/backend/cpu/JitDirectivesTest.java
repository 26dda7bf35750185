// The CPU backend's vector row loops must run compiled, not boxed: JitDirectives keeps them out of
// their callers' JIT compilations (see there why). Checked where it shows: the directive is in
// this JVM naming the marked loops, and once compiled a LayerNorm backward (which ran boxed
// without the directive, ~5 MB of vector objects a call at 2048 × 384) allocates next to nothing
// on the Java heap. With -Dfsdp4j.jitDirectives=false the last test fails.
package org.fsdp4j.backend.cpu;

import static org.fsdp4j.testing.RandomTensors.gaussian;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.management.ManagementFactory;
import java.util.Optional;
import java.util.Random;
import javax.management.ObjectName;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.junit.jupiter.api.Test;

class JitDirectivesTest {

    /** Heap bytes one compiled LayerNorm backward may allocate: its fp64 column partials (~0.3 MB), not vectors. */
    private static final long MAX_BYTES_PER_CALL = 1 << 20;

    @Test
    void everyKernelClassMarksItsLoopsAndTheDirectiveNamesThem() {
        for (Class<?> c : JitDirectives.KERNEL_CLASSES) {
            String prefix = c.getName().replace('.', '/') + ".";
            assertTrue(JitDirectives.kernels().stream().anyMatch(k -> k.startsWith(prefix)),
                    c.getSimpleName() + " has no @CompiledAlone method");
        }
        String directive = JitDirectives.directive();
        assertTrue(directive.contains("\"-org/fsdp4j/backend/cpu/LayerNormOps.backwardDx\""), directive);
        assertTrue(directive.contains("\"-org/fsdp4j/backend/cpu/Simd.expInPlace\""), directive);
    }

    @Test
    void theDirectiveIsInThisJvm() throws Exception {
        try (CpuBackend be = new CpuBackend(new MemoryTracker("jit"), 1)) {
            assertEquals(Optional.empty(), JitDirectives.reason());
        }
        Object printed = ManagementFactory.getPlatformMBeanServer().invoke(
                new ObjectName("com.sun.management:type=DiagnosticCommand"), "compilerDirectivesPrint",
                new Object[] {new String[0]}, new String[] {String[].class.getName()});
        assertTrue(String.valueOf(printed).contains("-org/fsdp4j/backend/cpu/LayerNormOps.backwardDx"),
                String.valueOf(printed));
    }

    @Test
    void layerNormBackwardStopsAllocatingOnceCompiled() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        assertTrue(mx.isThreadAllocatedMemorySupported(), "this JVM cannot count a thread's allocations");
        int rows = 2048;
        int c = 384;
        Random r = new Random(3);
        // one thread: every chunk runs on this thread, so its allocation counter sees the op whole
        try (CpuBackend be = new CpuBackend(new MemoryTracker("jit"), 1);
             Tensor x = gaussian(be, r, rows, c); Tensor g = gaussian(be, r, rows, c); Tensor w = gaussian(be, r, c);
             Tensor dx = gaussian(be, r, rows, c); Tensor dw = gaussian(be, r, c); Tensor db = gaussian(be, r, c);
             Tensor mean = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows);
             Tensor rstd = be.allocate(DType.F32, MemoryCategory.ACTIVATIONS, rows)) {
            be.layerNormForward(x, w, db, dx, mean, rstd);
            long id = Thread.currentThread().getId();
            long deadline = System.nanoTime() + 60_000_000_000L;   // C2 compiles within seconds; a loaded CI machine gets a minute
            long last = Long.MAX_VALUE;
            int calls = 0;
            while (System.nanoTime() < deadline) {
                long before = mx.getThreadAllocatedBytes(id);
                be.layerNormBackward(g, x, w, mean, rstd, dx, dw, db);
                last = mx.getThreadAllocatedBytes(id) - before;
                calls++;
                if (calls >= 200 && last < MAX_BYTES_PER_CALL) {
                    assertFalse(last < 0);
                    return;
                }
            }
            fail("after " + calls + " calls a LayerNorm backward (" + rows + " x " + c + ") still allocates " + last
                    + " heap bytes a call (limit " + MAX_BYTES_PER_CALL + "): its vector loops run boxed;"
                    + " JitDirectives: " + JitDirectives.reason().map(s -> s).orElse("installed"));
        }
    }
}
