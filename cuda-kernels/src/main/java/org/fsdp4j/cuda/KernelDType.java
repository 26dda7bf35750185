// The dtype codes kernels take (DT_* in src/main/cuda/common.cuh), kept apart from
// DType.ordinal() so reordering the enum cannot silently change what a kernel reads.
package org.fsdp4j.cuda;

import org.fsdp4j.api.DType;

final class KernelDType {

    private KernelDType() {
    }

    static int code(DType d) {
        switch (d) {
            case F32: return 0;
            case F16: return 1;
            case BF16: return 2;
            case I32: return 3;
            default: throw new IllegalArgumentException("no kernel dtype code for " + d);
        }
    }
}
