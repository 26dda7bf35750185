// The PyTorch parity checks (GptParityChecks) on the CPU backend, the reference every other
// backend is held to.
package org.fsdp4j.model;

import org.fsdp4j.backend.Backend;

class GptParityTest extends GptParityChecks {

    @Override
    protected Backend createBackend() {
        return GradCheck.cpuBackend();
    }
}
