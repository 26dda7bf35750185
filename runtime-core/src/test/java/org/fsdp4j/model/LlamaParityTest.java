// The Llama's PyTorch parity checks (LlamaParityChecks) on the CPU backend, the reference every
// other backend is held to.
package org.fsdp4j.model;

import org.fsdp4j.backend.Backend;

class LlamaParityTest extends LlamaParityChecks {

    @Override
    protected Backend createBackend() {
        return GradCheck.cpuBackend();
    }
}
