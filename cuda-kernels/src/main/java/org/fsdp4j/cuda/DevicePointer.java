// A JavaCPP Pointer at a raw device address. JavaCPP scales position() by the C parameter
// type (bytes for void*), so offsets are folded into the address here instead.
package org.fsdp4j.cuda;

import org.bytedeco.javacpp.Pointer;

final class DevicePointer extends Pointer {

    DevicePointer(long address) {
        this.address = address;
    }
}
