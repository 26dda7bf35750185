// The Llama's PyTorch parity checks (runtime-core's LlamaParityChecks, from its test-jar) on cuda:0:
// fp32 within the CPU backend's tolerances (TF32 off), and bf16 against PyTorch's bf16 autocast with
// the same rounding-point checks (cuBLAS sums in another order than oneDNN, which only flips rare
// roundings). Skipped with the probe's reason where no GPU is usable.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.model.LlamaParityChecks;
import org.junit.jupiter.api.Tag;

@Tag("gpu")
class CudaLlamaParityTest extends LlamaParityChecks {

    @Override
    protected Backend createBackend() {
        CudaProbe.Result probe = CudaProbe.probe();
        assumeTrue(probe.usable(), () -> "no usable GPU: " + probe.unavailableReason().orElse(""));
        // defaults(): TF32 off, so fp32 GEMMs are held to the CPU's fp32 tolerances
        return new CudaBackend(0, new MemoryTracker("parity"), CudaOptions.defaults());
    }
}
