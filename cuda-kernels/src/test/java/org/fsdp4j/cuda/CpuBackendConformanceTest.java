// The conformance checks on the CPU backend: proves the fp64 references the GPU is held to.
package org.fsdp4j.cuda;

import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;

class CpuBackendConformanceTest extends BackendConformanceTest {

    @Override
    Backend create(MemoryTracker tracker) {
        return Backends.create(Device.CPU, tracker, 2);
    }
}
