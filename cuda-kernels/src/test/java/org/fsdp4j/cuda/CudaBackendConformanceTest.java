// The conformance checks on cuda:0 (and its CPU twin); skipped with the probe's reason where
// no GPU is usable.
package org.fsdp4j.cuda;


import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Tag;

@Tag("gpu")
class CudaBackendConformanceTest extends BackendConformanceTest {

    @Override
    Backend create(MemoryTracker tracker) {
        StandIns.assumeGpu();
        return new CudaBackend(0, tracker, CudaOptions.defaults());
    }
}
