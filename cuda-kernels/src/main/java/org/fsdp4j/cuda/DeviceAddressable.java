// Storage whose bytes live at a device address (CudaStorage); what launchers read a Tensor's
// address from.
package org.fsdp4j.cuda;

interface DeviceAddressable {

    /** Device address of the first byte of the storage. */
    long address();
}
