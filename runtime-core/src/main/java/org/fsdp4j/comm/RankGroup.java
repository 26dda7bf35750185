// The ranks of one job that live in this process, as the code that starts them sees it: how many
// there are, the communicator over all of them for each rank (made on that rank's thread, with
// its backend), and the kill switch that makes every rank's pending and future collectives fail
// promptly once one rank has failed. The in-process group of threads (LocalGroup) is one; NCCL
// over the GPUs of this machine (nccl-comm) is another; a job spread over several processes
// (TcpGroup) runs size() of its worldSize() ranks here, from firstRank() on.
package org.fsdp4j.comm;

import java.time.Duration;
import org.fsdp4j.backend.Backend;

public interface RankGroup extends AutoCloseable {

    /** Ranks that live in this process. */
    int size();

    /** Ranks in the whole job: size() unless the job spans processes. */
    default int worldSize() {
        return size();
    }

    /** The first of the ranks this process runs, which are firstRank() .. firstRank() + size() − 1 (0 unless the job spans processes). */
    default int firstRank() {
        return 0;
    }

    /** How long a rank waits for the others in one collective before the group is aborted. */
    Duration timeout();

    /** (Global) rank {@code rank}'s communicator over the whole group, moving data with {@code backend}; call it on that rank's thread. */
    Communicator communicator(int rank, Backend backend);

    /** Poisons the group because rank {@code rank} failed with {@code cause}: every rank's collectives fail promptly, naming it. */
    void abort(int rank, Throwable cause);

    boolean isAborted();

    /**
     * Why the group was aborted (the first failure, naming the rank that caused it), or null while
     * it is healthy. A step that ran while its group was being aborted (NCCL lets a stream go on
     * past an aborted collective) is checked against it before its results are used.
     */
    default CommException abortCause() {
        return null;
    }

    /** How the group talks, for the run's header ("NCCL, collectives in NCCL's launch order"), or null to say nothing. */
    default String transport() {
        return null;
    }

    /**
     * This process is leaving the group: whatever still connects it to the other processes is
     * released, so that they notice (connections closed, communicators aborted). Idempotent; a
     * no-op for groups of one process.
     */
    @Override
    default void close() {
    }
}
