// What a NCCL communicator needs from its rank's GPU besides NCCL itself: the device address of a
// tensor, a stream's CUDA handle, and a scale on a stream (fp16's divide before and after the
// sum). CudaNcclDevice is the real one; the tests give a recording one.
package org.fsdp4j.nccl;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

interface NcclDevice {

    /** In words, for messages ("cuda:1"). */
    String name();

    long address(Tensor t);

    /** The CUDA handle of {@code stream}, as an address. */
    long stream(Backend.Stream stream);

    /** t *= alpha, issued on {@code stream}. */
    void scale(Tensor t, float alpha, Backend.Stream stream);

    /** Makes this device current on the calling thread (NCCL init and calls need it). */
    void makeCurrent();

    /** The device address of one F32 element this device keeps for collectives with no buffer of their own. */
    long scratch();

    /** Frees the scratch element, if any. */
    void close();

    /** The same device for another communicator (with a scratch of its own). */
    NcclDevice sibling();
}
