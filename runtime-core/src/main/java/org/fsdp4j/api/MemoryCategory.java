// The labels every tracked allocation carries, so the memory model (docs/ARCHITECTURE.md) can be
// checked byte for byte: persistent state (params, grads, optimizer) vs temporaries.
package org.fsdp4j.api;

public enum MemoryCategory {
    /** Parameters a rank keeps: the fp32 master shard and its half copy (or full params unsharded). */
    PARAMS,
    /** Gradients a rank keeps: its gradient shard (or the full gradient unsharded), plus unsharded grads in flight. */
    GRADS,
    /** Optimizer state: AdamW's m and v, SGD momentum. */
    OPTIMIZER,
    /** All-gather outputs: a unit's unsharded parameters while it runs. */
    GATHERED,
    /** Saved forward activations and their gradients. */
    ACTIVATIONS,
    /** Scratch: casts, communication staging, GEMM workspaces. */
    WORKSPACE;

    public String label() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
