// The argument checks every Communicator makes before it issues a collective, so the in-process
// group and NCCL refuse the same calls with the same one-line messages: one dtype travels,
// counts that fit the group, buffers that do not overlap where the collective forbids it.
package org.fsdp4j.comm;

import org.fsdp4j.api.Tensor;

public final class CollectiveChecks {

    private CollectiveChecks() {
    }

    /**
     * all-gather of input (n) into output (size · n) on group {@code group} at {@code rank};
     * returns whether input already is this rank's chunk of output (an in-place all-gather).
     */
    public static boolean allGather(String group, int size, int rank, Tensor input, Tensor output) {
        long n = input.numel();
        sameDtype("allGather", group, input, output);
        if (output.numel() != n * size) {
            throw new IllegalArgumentException("allGather on '" + group + "': output has " + output.numel()
                    + " elements, expected " + size + " × " + n);
        }
        boolean inPlace = sameRegion(input, output.view(rank * n, n));
        if (!inPlace && overlaps(input, output)) {
            throw new IllegalArgumentException("allGather on '" + group + "': the input overlaps the output "
                    + "other than as this rank's chunk");
        }
        return inPlace;
    }

    /** reduce-scatter of input (size · n) into output (n). */
    public static void reduceScatter(String group, int size, Tensor input, Tensor output) {
        long n = output.numel();
        sameDtype("reduceScatter", group, input, output);
        floating("reduceScatter", group, input);
        if (input.numel() != n * size) {
            throw new IllegalArgumentException("reduceScatter on '" + group + "': input has " + input.numel()
                    + " elements, expected " + size + " × " + n);
        }
        if (overlaps(input, output)) {
            throw new IllegalArgumentException("reduceScatter on '" + group + "': the output overlaps the input");
        }
    }

    /** sharedBuffer of {@code numel} elements on a group of {@code size}: each rank is charged an equal part. */
    public static void sharedBuffer(String group, int size, long numel) {
        if (numel < 0 || numel % size != 0) {
            throw new IllegalArgumentException("communicator '" + group + "': a shared buffer is charged to its " + size
                    + " ranks in equal parts, so its " + numel + " elements must be a multiple of " + size);
        }
    }

    public static void allReduce(String group, Tensor buffer) {
        floating("allReduce", group, buffer);
    }

    public static void broadcast(String group, int size, int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("broadcast on '" + group + "': root " + root
                    + " is outside a group of " + size);
        }
    }

    private static void sameDtype(String op, String group, Tensor a, Tensor b) {
        if (a.dtype() != b.dtype()) {
            throw new IllegalArgumentException(op + " on '" + group + "': input is " + a.dtype().shortName()
                    + " but output is " + b.dtype().shortName() + "; cast before the collective so one dtype travels");
        }
    }

    private static void floating(String op, String group, Tensor t) {
        if (!t.dtype().isFloating()) {
            throw new IllegalArgumentException(op + " on '" + group + "' reduces floating buffers, got " + t.dtype());
        }
    }

    /** Whether a and b are exactly the same bytes. */
    public static boolean sameRegion(Tensor a, Tensor b) {
        return a.rawStorage() == b.rawStorage() && a.byteOffset() == b.byteOffset() && a.numBytes() == b.numBytes();
    }

    /** Whether a and b share any byte. */
    public static boolean overlaps(Tensor a, Tensor b) {
        return a.rawStorage() == b.rawStorage() && a.byteOffset() < b.byteOffset() + b.numBytes()
                && b.byteOffset() < a.byteOffset() + a.numBytes();
    }
}
