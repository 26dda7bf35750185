// A test's in-process group that behaves as ranks in separate processes do: it says its ranks do
// not share memory, so the engine gives every all-gather its own buffer and copies
// into it, as over TCP or NCCL. Split groups are wrapped too.
package org.fsdp4j.comm;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;

public final class SeparateAddressSpaces extends ForwardingCommunicator {

    public SeparateAddressSpaces(Communicator inner) {
        super(inner);
    }

    @Override
    public boolean sharesMemory() {
        return false;
    }

    @Override
    public SharedBuffer sharedBuffer(DType dtype, MemoryCategory category, long numel) {
        throw new UnsupportedOperationException("this test's group behaves as separate processes");
    }

    @Override
    public Communicator split(int color, int key, String name) {
        return new SeparateAddressSpaces(inner.split(color, key, name));
    }
}
