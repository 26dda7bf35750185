// What a launcher needs from a Tensor: its device address (storage base + byte offset) and
// the dtype code its kernel takes. Rejects tensors that do not live on this CUDA device.
package org.fsdp4j.cuda;

import org.fsdp4j.api.Device;
import org.fsdp4j.api.Tensor;

final class DeviceTensors {

    private DeviceTensors() {
    }

    static long address(Tensor t) {
        if (!(t.storage() instanceof DeviceAddressable s)) {
            throw new IllegalArgumentException(t + " is not in CUDA memory: copy it to the GPU first");
        }
        return s.address() + t.byteOffset();
    }

    static int code(Tensor t) {
        return KernelDType.code(t.dtype());
    }

    static void requireOn(Device device, Tensor t, String op) {
        if (!t.device().equals(device)) {
            throw new IllegalArgumentException(op + ": " + t + " is on " + t.device() + ", this backend is " + device);
        }
    }
}
