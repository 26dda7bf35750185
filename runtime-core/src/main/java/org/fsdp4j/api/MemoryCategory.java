// The labels every tracked allocation carries, so the memory model (docs/ARCHITECTURE.md) can be
// checked byte for byte: persistent state (params, grads, optimizer) vs temporaries.
package org.fsdp4j.api;

/**
 * What an allocation holds. Every tensor a backend allocates carries one (see
 * {@link Ops#allocate}), and its {@link MemoryTracker} counts live and peak bytes per category,
 * so the memory a rank uses is measured, not estimated. {@link #PARAMS}, {@link #GRADS} and
 * {@link #OPTIMIZER} are the persistent state ({@link MemoryTracker#persistentBytes()}); the rest
 * are temporaries of a step.
 */
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

    /**
     * The category's name in reports and error messages.
     *
     * @return the constant's name in lower case: "params", "grads", "optimizer", "gathered",
     *         "activations" or "workspace"
     */
    public String label() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
