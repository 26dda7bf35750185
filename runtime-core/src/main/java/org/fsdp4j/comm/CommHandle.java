// What an asynchronous collective returns: a handle to wait on, like a CUDA event recorded
// after the collective on the communicator's stream. Waiting rethrows the collective's failure
// (timeout, aborted group, mismatched calls) as a CommException in the waiting thread.
package org.fsdp4j.comm;

public interface CommHandle {

    /** Blocks until the collective has completed on this rank; throws CommException if it failed. */
    void await();

    /** True once the collective has completed, successfully or not. */
    boolean isDone();
}
