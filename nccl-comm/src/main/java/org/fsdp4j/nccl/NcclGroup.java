// The ranks of this process on different GPUs, talking through NCCL: one unique id for the job,
// each rank's communicator made on its own thread with its GPU current (ncclCommInitRank blocks
// until every rank has called it), and one kill switch. A failure on any rank aborts every
// communicator the group made (ncclCommAbort), so no rank stays blocked in a collective; their
// later collectives fail at once, naming the rank that failed first.
package org.fsdp4j.nccl;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.RankGroup;

public final class NcclGroup implements RankGroup {

    private final NcclApi nccl;
    private final int size;
    private final Duration timeout;
    private final byte[] uniqueId = new byte[NativeNccl.UNIQUE_ID_BYTES];
    private final Function<Backend, NcclDevice> devices;
    private final List<NcclCommunicator> live = new ArrayList<>();
    private volatile CommException abortCause;

    NcclGroup(NcclApi nccl, int size, Duration timeout, Function<Backend, NcclDevice> devices) {
        if (size < 1) {
            throw new IllegalArgumentException("world size must be >= 1, got " + size);
        }
        this.nccl = nccl;
        this.size = size;
        this.timeout = timeout;
        this.devices = devices;
        int rc = nccl.uniqueId(uniqueId);
        if (rc != NcclApi.SUCCESS) {
            throw new CommException("ncclGetUniqueId failed: " + nccl.errorString(rc));
        }
    }

    /** {@code size} ranks of this process, rank r on its own GPU (the real NCCL). */
    public static NcclGroup create(int size, Duration timeout) {
        return new NcclGroup(new NativeNccl(), size, timeout, CudaNcclDevice::new);
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    /** ncclCommInitRank for rank {@code rank} on {@code backend}'s GPU; returns once every rank has joined. */
    @Override
    public Communicator communicator(int rank, Backend backend) {
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " is outside a group of " + size);
        }
        checkNotAborted("joining the NCCL group at rank " + rank);
        NcclDevice device = devices.apply(backend);
        device.makeCurrent();
        long[] comm = new long[1];
        int rc = nccl.commInitRank(comm, size, uniqueId.clone(), rank);
        if (rc != NcclApi.SUCCESS) {
            CommException e = new CommException("ncclCommInitRank at rank " + rank + " of " + size + " on "
                    + device.name() + " failed: " + nccl.errorString(rc));
            abort(rank, e);
            throw e;
        }
        return new NcclCommunicator(nccl, this, device, comm[0], "world", rank, size, rank);
    }

    @Override
    public void abort(int rank, Throwable cause) {
        List<NcclCommunicator> all;
        synchronized (this) {
            if (abortCause != null) {
                return;
            }
            abortCause = cause instanceof CommException ce && ce.getMessage().startsWith("rank ") ? ce
                    : new CommException("rank " + rank + " failed: " + describe(cause), cause);
            all = new ArrayList<>(live);
        }
        for (NcclCommunicator c : all) {
            c.abortNative();
        }
    }

    @Override
    public boolean isAborted() {
        return abortCause != null;
    }

    void checkNotAborted(String where) {
        CommException c = abortCause;
        if (c != null) {
            throw new CommException(where + ": group aborted: " + c.getMessage(), c);
        }
    }

    synchronized void register(NcclCommunicator c) {
        live.add(c);
        if (abortCause != null) {
            c.abortNative();
        }
    }

    synchronized void forget(NcclCommunicator c) {
        live.remove(c);
    }

    private static String describe(Throwable t) {
        return t instanceof CommException ? t.getMessage() : t.getClass().getSimpleName() + ": " + t.getMessage();
    }
}
