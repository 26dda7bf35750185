// The one elementwise comparison every backend test uses (the CPU backend's tests here, the
// CUDA backend's through runtime-core's test-jar): |got − ref| ≤ atol + rtol·|ref|, failing
// with the first bad index, both values, the tolerance and the seed that reproduces it.
package org.fsdp4j.testing;

import static org.junit.jupiter.api.Assertions.fail;

public final class Tolerances {

    private Tolerances() {
    }

    public static void assertClose(String what, double[] ref, double[] got, double atol, double rtol, long seed) {
        if (ref.length != got.length) {
            fail(what + ": length " + got.length + " != " + ref.length + " (seed " + seed + ")");
        }
        for (int i = 0; i < ref.length; i++) {
            double tol = atol + rtol * Math.abs(ref[i]);
            if (!(Math.abs(got[i] - ref[i]) <= tol)) {
                fail(what + ": element " + i + " is " + got[i] + ", reference " + ref[i] + ", tolerance " + tol
                        + " (atol " + atol + ", rtol " + rtol + "; seed " + seed + ")");
            }
        }
    }
}
