/**
 * The CPU backend: the reference implementation of {@link org.fsdp4j.backend.Backend}, used by CI,
 * laptops and every parity test.
 *
 * <ul>
 *   <li>{@code CpuStorage}: malloc'd host memory with native-order NIO views (and the public
 *       byte/float views other code uses to reach a CPU tensor's bytes).</li>
 *   <li>{@code Elements}: moves rows/chunks between a tensor and fp32 scratch; the only place
 *       that knows F32/F16/BF16/I32 layouts, so each op dispatches on dtype once per chunk.</li>
 *   <li>{@code CpuThreads}: fixed-chunk parallel loops whose results do not depend on the thread
 *       count; {@code ColumnSums} builds deterministic column reductions on it.</li>
 *   <li>{@code OpenBlas} (the only native calls) and {@code GemmOp}: single-threaded sgemm over
 *       shape-determined tiles on the backend's own threads.</li>
 *   <li>The math, one file per family: {@code ElementwiseOps}, {@code LayerNormOps}, {@code RmsNormOps},
 *       {@code EmbeddingOps}, {@code AttentionOps}, {@code CrossEntropyOps}, {@code OptimizerOps},
 *       {@code ReductionOps}; {@code CpuBackend} wires them to the interface.</li>
 * </ul>
 */
package org.fsdp4j.backend.cpu;
