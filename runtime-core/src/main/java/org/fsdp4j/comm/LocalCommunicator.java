// One rank's view of an in-process group. Every collective is the same three phases: the ranks
// meet and deposit their buffers, each rank reads what it needs from the others with backend ops
// (rank r reduces or copies only its own part, so the ranks' copies run in parallel like a ring),
// and a final meeting so that no rank's stream goes on to reuse a buffer another still reads.
// Where the phases run is the group's Dispatch:
//   HOST_FUNCTIONS  (CPU ranks) the whole collective is a host function queued on the stream it is
//                   given: the meetings happen when the streams get there, as NCCL's kernels meet,
//                   and the copies are CPU ops called from inside stream work, which run at once.
//   STREAM_EVENTS   (any backend, e.g. several ranks on one GPU) the ranks meet on the host when
//                   they issue the collective, trading an event recorded on each stream: every
//                   stream waits for the others' "inputs ready" events, its copies are issued on it
//                   as ordinary ops, and it waits for the others' "done reading" events before its
//                   later work. The host never waits for device work; it only meets the other hosts.
// A group of one never meets anyone: its collectives are plain backend ops on the stream.
// CPU ranks share the process's memory: sharedBuffer gives them one buffer, and a copy whose
// source already is its destination (an all-gather into such a buffer from its own chunks) is
// skipped, so that collective is only its two meetings. What every host-side communicator does
// alike (checks, labels, a group of one, the failure policy) is HostCommunicator's.
package org.fsdp4j.comm;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

final class LocalCommunicator extends HostCommunicator {

    private final Rendezvous group;
    private final LocalGroup.Dispatch dispatch;

    LocalCommunicator(Rendezvous group, int rank, Backend backend, LocalGroup.Dispatch dispatch) {
        super(group.name(), rank, group.size(), group.globalRank(rank), group.fate(), backend);
        this.group = group;
        this.dispatch = dispatch;
    }

    // ------------------------------------------------------------------ collectives

    @Override
    protected void allGatherAmong(Tensor input, Tensor output, boolean inPlace, String signature,
                                  Backend.Stream stream) {
        long n = input.numel();
        collective(CommOp.ALL_GATHER, stream, signature, input, inputs -> {
            for (int q = 0; q < size(); q++) {
                if (q == rank() && inPlace) {
                    continue;
                }
                Tensor chunk = output.view(q * n, n);
                if (n > 0 && !CollectiveChecks.sameRegion(inputs[q], chunk)) {
                    backend.copy(inputs[q].reshape(n), chunk);
                }
            }
        });
    }

    @Override
    protected void reduceScatterAmong(Tensor input, Tensor output, Reduction reduction, String signature,
                                      Backend.Stream stream) {
        long n = output.numel();
        collective(CommOp.REDUCE_SCATTER, stream, signature, input,
                inputs -> reduceInto(inputs, rank() * n, n, reduction, List.of(output.reshape(n))));
    }

    @Override
    protected void allReduceAmong(Tensor buffer, Reduction reduction, String signature, Backend.Stream stream) {
        collective(CommOp.ALL_REDUCE, stream, signature, buffer, buffers -> {
            // Rank r owns chunk r: it reads chunk r of every buffer and writes the result back to all
            // of them. Chunks are disjoint, so no rank reads what another is writing.
            long total = buffer.numel();
            long lo = rank() * total / size();
            long hi = (rank() + 1) * total / size();
            List<Tensor> destinations = new ArrayList<>();
            for (Tensor b : buffers) {
                destinations.add(b.reshape(total).view(lo, hi - lo));
            }
            reduceInto(buffers, lo, hi - lo, reduction, destinations);
        });
    }

    @Override
    protected void broadcastAmong(Tensor buffer, int root, String signature, Backend.Stream stream) {
        collective(CommOp.BROADCAST, stream, signature, buffer, buffers -> {
            if (rank() != root && buffer.numel() > 0) {
                backend.copy(buffers[root], buffer);
            }
        });
    }

    @Override
    protected void barrierAmong(Backend.Stream stream) {
        collective(CommOp.BARRIER, stream, "barrier()", null, buffers -> { });
    }

    @Override
    protected Communicator splitAmong(int color, int key, String name, long seq, String where) {
        Object[] all = meet(group, rank(), Deposit.split(color, key), where);
        List<Integer> members = new ArrayList<>();
        for (int m = 0; m < all.length; m++) {
            if (((Deposit) all[m]).color() == color) {
                members.add(m);
            }
        }
        members.sort((a, b) -> {
            int c = Integer.compare(((Deposit) all[a]).key(), ((Deposit) all[b]).key());
            return c != 0 ? c : Integer.compare(a, b);
        });
        int[] globalRanks = members.stream().mapToInt(group::globalRank).toArray();
        String subName = group.name() + "/" + name;
        Rendezvous sub = group.fate().subgroup(group.name() + "#" + seq + ":" + color,
                k -> new Rendezvous(subName, globalRanks, group.timeout(), group.fate()));
        return new LocalCommunicator(sub, members.indexOf(rank()), backend, dispatch);
    }

    @Override
    public boolean sharesMemory() {
        return dispatch == LocalGroup.Dispatch.HOST_FUNCTIONS && backend.device().isCpu();
    }

    /** Rank 0 allocates the buffer, charged to every rank's tracker, and hands each rank a handle. */
    @Override
    protected SharedBuffer shareAmong(String where, long seq, String signature, DType dtype, MemoryCategory category,
                                      long numel) {
        Object[] all = meet(group, rank(), Deposit.charged(signature, backend.memory()), where);
        Tensor owner = rank() == 0 ? backend.allocateShared(dtype, category, trackers(all), numel) : null;
        return handOut(group, rank(), owner, where);
    }

    /** Under STREAM_EVENTS the ranks meet on the host when they issue, so set-up calls meet there at once. */
    @Override
    protected boolean meetsOnHost() {
        return dispatch == LocalGroup.Dispatch.STREAM_EVENTS;
    }

    /** A bug in the caller (the ranks disagree), which the failure policy reports as this rank's. */
    @Override
    protected RuntimeException differentCollectives(String message) {
        return new IllegalStateException(message);
    }

    @Override
    protected String failureText(Throwable t) {
        return describe(t);
    }

    // ------------------------------------------------------------------ machinery

    /**
     * Runs a collective of two or more ranks on {@code stream}: meet, read with {@code body}
     * (every rank's buffer, index = rank), meet again.
     */
    private void collective(CommOp op, Backend.Stream stream, String signature, Tensor mine,
                            java.util.function.Consumer<Tensor[]> body) {
        issue(op, stream, (seq, where) -> {
            if (dispatch == LocalGroup.Dispatch.HOST_FUNCTIONS) {
                requireCpuStreams(op);
                inHostFunction(stream, where, group, rank(), Deposit.of(signature, mine),
                        (w, start, buffers) -> body.accept(buffers));
                return;
            }
            guarded(where, () -> {
                Object[] all = meet(group, rank(), new Deposit(signature, mine, stream.record(), 0, 0, null), where);
                for (int q = 0; q < all.length; q++) {
                    if (q != rank()) {
                        stream.waitFor(((Deposit) all[q]).ready());     // their inputs are written
                    }
                }
                try (Backend.StreamScope on = backend.onStream(stream)) {
                    body.accept(buffers(all));
                }
                Object[] done = group.exchange(rank(), stream.record(), where + " (completion)");
                for (int q = 0; q < done.length; q++) {
                    if (q != rank()) {
                        stream.waitFor((Backend.Event) done[q]);           // they have read ours
                    }
                }
                return null;
            });
        });
    }

    /** The copies inside a collective's host function are backend ops, which only the CPU backend runs there (CUDA forbids it). */
    private void requireCpuStreams(CommOp op) {
        if (!backend.device().isCpu()) {
            throw new IllegalArgumentException(op.label() + " on '" + name() + "': the in-process group moves data"
                    + " between CPU ranks; " + size() + " ranks on " + backend.device()
                    + " need the NCCL communicator");
        }
    }

    private void reduceInto(Tensor[] sources, long offset, long n, Reduction reduction, List<Tensor> destinations) {
        Reductions.reduceInto(backend, size(), sources, offset, n, reduction, destinations);
    }
}
