// One rank's handle on a buffer that every rank of an in-process group holds at the same address
// (Communicator.sharedBuffer): the ranks read it in place instead of receiving copies of it. Each
// rank closes its own handle once its own streams are done with the buffer; the memory goes back
// when the last handle is closed, so no rank frees what another may still read.
package org.fsdp4j.comm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.fsdp4j.api.Tensor;

public final class SharedBuffer implements AutoCloseable {

    private final Tensor owner;          // the allocation; closed with the last handle
    private final AtomicInteger open;    // handles not closed yet
    private final Tensor whole;          // a view of all of it, for this rank
    private boolean closed;

    private SharedBuffer(Tensor owner, AtomicInteger open) {
        this.owner = owner;
        this.open = open;
        this.whole = owner.view(0, owner.shape());
    }

    /** {@code holders} handles on {@code owner}, one per rank: the last one closed closes it. */
    static List<SharedBuffer> handles(Tensor owner, int holders) {
        AtomicInteger open = new AtomicInteger(holders);
        List<SharedBuffer> handles = new ArrayList<>();
        for (int i = 0; i < holders; i++) {
            handles.add(new SharedBuffer(owner, open));
        }
        return List.copyOf(handles);
    }

    /** The whole buffer (a view: never close it; close the handle). */
    public Tensor tensor() {
        return whole;
    }

    /** This rank is done with the buffer (its streams no longer use it). Idempotent. */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        if (open.decrementAndGet() == 0) {
            owner.close();
        }
    }
}
