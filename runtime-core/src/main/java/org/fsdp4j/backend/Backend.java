// A rank's device as the runtime sees it: the model's operations (org.fsdp4j.api.Ops, whose
// conventions hold here too), plus what only the engine uses: the optimizer's kernels, the
// reductions for the gradient norm, streams and events, and the counters a step reports. One
// instance per (rank, device): it owns that rank's memory tracker and its streams. The CPU
// backend is the reference every other backend is tested against.
//
// On top of Ops' conventions:
// - Work is issued on the calling thread's current stream (see setStream / onStream) and the
//   call returns without waiting for it, as on a GPU: the CPU backend models one (see
//   docs/ARCHITECTURE.md, "Streams and events"). Shapes and closed tensors are checked when the
//   call is made. Work crosses streams only through events (Stream.record / Stream.waitFor).
// - Memory is stream-ordered, as CUDA's caching allocator: a tensor is allocated for the
//   current stream and may be closed by the host as soon as the last work that reads it is
//   issued on that stream; another stream that uses it must either be ordered before that
//   stream's later work by an event, or be named with recordStream.
// - The calls that hand a value to the host (copyToHost, sum, sumOfSquares, hasNonFinite,
//   synchronize, Stream.synchronize, Event.synchronize) block until the work they depend on is
//   done; each counts as one host synchronisation (hostSyncs). Everything else never blocks the
//   host on a GPU.
package org.fsdp4j.backend;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.OptionalDouble;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

public interface Backend extends Ops, AutoCloseable {

    /** Short name for logs: "cpu (PanelGemm 6x4 + OpenBLAS, 2 threads)", "cuda:0 (NVIDIA H200)". */
    String name();

    /** The tracker every allocation of this backend reports to. */
    MemoryTracker memory();

    /**
     * A buffer that several in-process ranks read and write in place (one group's all-gather
     * output: the in-process group's sharedBuffer), charged in equal parts to {@code charged}, one
     * tracker per rank. Not stream-ordered: whoever closes it does so once every rank's streams
     * are done with it. Backends whose ranks cannot share memory (a device each) refuse it.
     */
    default Tensor allocateShared(DType dtype, MemoryCategory category, List<MemoryTracker> charged, long... shape) {
        throw new UnsupportedOperationException(name() + " cannot hold a buffer that several ranks share");
    }

    // ------------------------------------------------------------------ attention from the general ops

    /** The composite causal attention (batched GEMMs and the causal softmax); a backend may fuse it. */
    @Override
    default void causalAttentionForward(Tensor q, Tensor k, Tensor v, float scale, Tensor att, Tensor yHeads) {
        CompositeAttention.forward(this, q, k, v, scale, att, yHeads);
    }

    /** The composite backward of {@link #causalAttentionForward}. */
    @Override
    default void causalAttentionBackward(Tensor q, Tensor k, Tensor v, Tensor att, Tensor dyHeads, float scale,
                                         Tensor dq, Tensor dk, Tensor dv) {
        CompositeAttention.backward(this, q, k, v, att, dyHeads, scale, dq, dk, dv);
    }

    /** Splits the heads, attends (as {@link #causalAttentionForward}) and merges them; a backend may work in place. */
    @Override
    default void causalSelfAttentionForward(Tensor qkv, int numHeads, int numKvHeads, float scale, Tensor att,
                                            Tensor y) {
        CompositeAttention.packedForward(this, qkv, numHeads, numKvHeads, scale, att, y);
    }

    /** The composite backward of {@link #causalSelfAttentionForward}. */
    @Override
    default void causalSelfAttentionBackward(Tensor qkv, Tensor att, Tensor dy, int numHeads, int numKvHeads,
                                             float scale, Tensor dqkv) {
        CompositeAttention.packedBackward(this, qkv, att, dy, numHeads, numKvHeads, scale, dqkv);
    }

    /**
     * A tensor over {@code mapping}, memory that processes of one host map together (a group's
     * shared buffer under /dev/shm), charged in {@code parts} equal parts of which {@code charged}
     * are this process's ranks'; {@code release} runs when it closes. Only a backend whose
     * tensors live in host memory can; the others refuse it.
     */
    default Tensor overMapping(ByteBuffer mapping, Runnable release, DType dtype, MemoryCategory category,
                               List<MemoryTracker> charged, int parts, long... shape) {
        throw new UnsupportedOperationException(name() + " keeps its tensors on a device, not in mapped host memory");
    }

    /**
     * The bytes of host tensor {@code t}, native order, for a transport that moves host memory
     * (the TCP group between processes); valid while {@code t} is open, in its stream's order.
     * Backends whose tensors live on a device refuse it.
     */
    default ByteBuffer hostBytes(Tensor t) {
        throw new UnsupportedOperationException(name() + " keeps its tensors on a device: their bytes are not host memory");
    }

    /**
     * The device's dense peak for GEMMs with {@code operands}-typed inputs and fp32 accumulation,
     * in TFLOP/s, for reporting achieved throughput as a share of it (bench gemm, MFU); empty
     * where the backend does not know it (the default).
     */
    default OptionalDouble peakTflops(DType operands) {
        return OptionalDouble.empty();
    }

    // ------------------------------------------------------------------ optimizer and reductions

    /**
     * One AdamW step on a flat F32 buffer: g = gradScale · grad; m = β1 m + (1−β1) g;
     * v = β2 v + (1−β2) g²; p −= lr · (m̂ / (√v̂ + eps) + weightDecay · p), with
     * m̂ = m / (1 − β1^t), v̂ = v / (1 − β2^t). param, m, v F32; grad any float dtype.
     */
    void adamW(Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep step);

    /** SGD with momentum: g = gradScale·grad + wd·p; buf = momentum·buf + g; p −= lr·buf. */
    void sgdMomentum(Tensor param, Tensor grad, Tensor momentumBuf, float lr, float momentum,
                     float weightDecay, float gradScale);

    /** Σ x² accumulated in fp64 where the backend can (at least fp32 pairwise). */
    double sumOfSquares(Tensor t);

    /** True if any element is ±inf or NaN. */
    boolean hasNonFinite(Tensor t);

    /** out[0] += scale · Σ t², accumulated and rounded as sumInto. */
    void sumOfSquaresInto(Tensor t, float scale, Tensor out);

    // ------------------------------------------------------------------ streams and events

    /** The stream every thread issues on until setStream says otherwise: the forward/backward compute. */
    Stream computeStream();

    /** A new named stream (its name says why it exists: "all-gather", "reduce-scatter"). */
    Stream newStream(String name);

    /** Makes {@code stream} the calling thread's current stream for this backend (null: the compute stream). */
    void setStream(Stream stream);

    /** The calling thread's current stream. */
    Stream currentStream();

    /** Issues on {@code stream} until the returned scope is closed, then on the previous stream again. */
    default StreamScope onStream(Stream stream) {
        Stream previous = currentStream();
        setStream(stream);
        return () -> setStream(previous);
    }

    /**
     * Tells the allocator that {@code stream} uses {@code t}, which was allocated for another
     * stream: when t is closed, its bytes are not reused until the work {@code stream} has been
     * given by then is done (torch's record_stream). No stream waits for another because of it.
     */
    void recordStream(Tensor t, Stream stream);

    /** Blocks the host until all work this backend issued on any stream is done (a host synchronisation). */
    void synchronize();

    /** Host synchronisations so far (see the class comment): the step's budget is one. */
    long hostSyncs();

    /**
     * GEMMs so far whose operands had different dtypes (e.g. fp32 activations × bf16 weights),
     * each of which the CUDA backend serves by promoting its operands to fp32 with a copy (the CPU
     * converts while packing either way). Zero when compute runs in the parameter dtype.
     */
    long promotedCopies();

    /** Frees what the backend holds itself (pools, handles); tensors it handed out are the caller's. */
    @Override
    void close();

    /** Restores the previous current stream when closed (see onStream). */
    interface StreamScope extends AutoCloseable {
        @Override
        void close();
    }

    /**
     * A sequence of work that runs in issue order. Closing one waits for its work and destroys it;
     * using it afterwards throws.
     */
    interface Stream extends AutoCloseable {
        String name();

        /** An event that completes when the work issued on this stream so far is done. */
        Event record();

        /** Work issued on this stream from now on runs after {@code event}; never blocks the host. */
        void waitFor(Event event);

        /**
         * Runs {@code fn} on the host in stream order (after the work before it; the work after it
         * waits for it), like cudaLaunchHostFunc: it must not issue work on this backend itself.
         * A failure of fn fails the stream: later work on it is skipped and its events fail.
         */
        void launchHostFunc(Runnable fn);

        /** Blocks the host until the work issued so far is done (a host synchronisation); rethrows its failure. */
        void synchronize();

        @Override
        void close();
    }

    /** A point in a stream's work: waitable by other streams, and by the host. */
    interface Event {
        /** Blocks the host until the work before the event is done (a host synchronisation); rethrows its failure. */
        void synchronize();

        /** True once the work before the event is done (successfully or not); never blocks. */
        boolean isDone();

        /**
         * Blocks the calling thread until the work before the event is done, without counting a
         * host synchronisation: how a stream of another backend (a CPU stream waiting for a GPU,
         * or a GPU stream's host function waiting for the CPU) waits for it in its own order.
         */
        void block();
    }
}
