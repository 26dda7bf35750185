// fp16 → fp32 by table lookup: the widening is exact, there are only 65536 inputs, and a
// 256 KiB table is several times faster than DType.halfToFloat's branches in the hot loops.
// The table is built from DType.halfToFloat itself, so the two can never disagree.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.api.DType;

final class HalfTables {

    private static final float[] HALF_TO_FLOAT = new float[1 << 16];

    static {
        for (int bits = 0; bits < HALF_TO_FLOAT.length; bits++) {
            HALF_TO_FLOAT[bits] = DType.halfToFloat((short) bits);
        }
    }

    private HalfTables() {
    }

    static float halfToFloat(short bits) {
        return HALF_TO_FLOAT[bits & 0xffff];
    }
}
