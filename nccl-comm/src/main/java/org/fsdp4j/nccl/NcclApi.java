// Every NCCL call fsdp4j makes, in one place, with communicators as plain addresses and return
// codes as NCCL returns them: NativeNccl is the real library (through JavaCPP), and the tests
// put a recording one in its place to check each call site's arguments without a GPU.
package org.fsdp4j.nccl;

import org.fsdp4j.api.DType;

interface NcclApi {

    /** NCCL's success code. */
    int SUCCESS = 0;

    /** ncclInProgress: a non-blocking communicator's call (or its creation) has not finished yet. */
    int IN_PROGRESS = 7;

    /** ncclReduction codes. */
    int OP_SUM = 0;
    int OP_AVG = 4;

    /** ncclGetUniqueId: the 128 bytes every rank of a new communicator must be given. */
    int uniqueId(byte[] out);

    /**
     * ncclCommInitRankConfig with NCCL's default config but for {@code blocking}; the new
     * communicator's address goes into commOut[0]. Non-blocking, it may return IN_PROGRESS: the
     * caller then polls commGetAsyncError until the communicator is ready.
     */
    int commInitRank(long[] commOut, int nranks, byte[] uniqueId, int rank, boolean blocking);

    /** ncclCommSplit with NCCL's default config but for {@code blocking}; the new communicator's address goes into commOut[0]. */
    int commSplit(long comm, int color, int key, long[] commOut, boolean blocking);

    /** ncclCommFinalize: flushes a communicator's work before ncclCommDestroy (polled when non-blocking). */
    int commFinalize(long comm);

    /** ncclGetVersion (e.g. 22903 for 2.29.3), into out[0]. */
    int version(int[] out);

    /** ncclCommUserRank: this rank's index in comm, into out[0]. */
    int commUserRank(long comm, int[] out);

    /** ncclCommCount: the ranks of comm, into out[0]. */
    int commCount(long comm, int[] out);

    int allGather(long send, long recv, long sendCount, DType dtype, long comm, long stream);

    int reduceScatter(long send, long recv, long recvCount, DType dtype, int op, long comm, long stream);

    int allReduce(long send, long recv, long count, DType dtype, int op, long comm, long stream);

    int broadcast(long send, long recv, long count, DType dtype, int root, long comm, long stream);

    int groupStart();

    int groupEnd();

    /** ncclCommGetAsyncError; the error goes into out[0]. */
    int commGetAsyncError(long comm, int[] out);

    int commAbort(long comm);

    int commDestroy(long comm);

    String errorString(int result);

    /** ncclGetLastError: NCCL's own explanation of the last failure on comm ("" when it has none). */
    String lastError(long comm);
}
