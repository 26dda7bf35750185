// One emulator test case: the kernels it is about (its subjects, which it must launch), its device
// with inputs and the launches the real launchers recorded, and what each output must hold:
// an fp64 reference with an error bound (Approx) per element. A result passes when it lies in
// the interval [ref − bound, ref + bound] as the output dtype rounds it (rounding is monotone,
// so the store's own rounding, overflow to ±inf included, needs no separate allowance); a
// non-finite reference must come out exactly (NaN as any NaN, ±inf with its sign).
package org.fsdp4j.cuda;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class EmuCase {

    private record Expectation(String what, Tensor tensor, double[] ref, double[] bound) {
    }

    final List<String> subjects;
    final String name;
    final EmuDevice device = new EmuDevice();
    private final List<Expectation> expectations = new ArrayList<>();
    private final List<Expectation> f64Expectations = new ArrayList<>();

    EmuCase(String subject, String details) {
        this(List.of(subject), details);
    }

    /** A case about several kernels whose results are only checked together (a two-pass sum). */
    EmuCase(List<String> subjects, String details) {
        this.subjects = List.copyOf(subjects);
        this.name = String.join(" + ", subjects) + " " + details;
    }

    /** {@code t} must match {@code ref} within its bounds, element by element. */
    void expect(String what, Tensor t, Approx[] ref) {
        double[] v = new double[ref.length];
        double[] e = new double[ref.length];
        for (int i = 0; i < ref.length; i++) {
            v[i] = ref[i].v();
            e[i] = ref[i].e();
        }
        expectations.add(new Expectation(what, t, v, e));
    }

    /** {@code t} must equal {@code ref} once rounded to t's dtype (copies, fills, integers). */
    void expectExact(String what, Tensor t, double[] ref) {
        expectations.add(new Expectation(what, t, ref.clone(), new double[ref.length]));
    }

    /** The fp64 value a kernel writes at t's first byte must lie within ref ± bound (or equal a non-finite ref). */
    void expectF64(String what, Tensor t, double ref, double bound) {
        f64Expectations.add(new Expectation(what, t, new double[] {ref}, new double[] {bound}));
    }

    /** Fails with the first element out of bounds in each output, or returns normally. */
    void verify(List<ByteBuffer> image, long seed) {
        StringBuilder failures = new StringBuilder();
        for (Expectation x : f64Expectations) {
            double got = image.get(EmuDevice.id(x.tensor)).getDouble(Math.toIntExact(x.tensor.byteOffset()));
            double ref = x.ref[0];
            boolean ok = Double.isFinite(ref) ? Math.abs(got - ref) <= x.bound[0]
                    : (Double.isNaN(ref) ? Double.isNaN(got) : got == ref);
            if (!ok) {
                failures.append("\n  ").append(x.what).append(": ").append(got).append(", reference ").append(ref)
                        .append(" ± ").append(x.bound[0]);
            }
        }
        for (Expectation x : expectations) {
            double[] got = EmuDevice.read(image, x.tensor);
            for (int i = 0; i < got.length; i++) {
                String bad = outOfBounds(x.tensor.dtype(), x.ref[i], x.bound[i], got[i]);
                if (bad != null) {
                    failures.append("\n  ").append(x.what).append(" [").append(i).append("]: ").append(bad);
                    break;
                }
            }
        }
        if (failures.length() > 0) {
            throw new AssertionError(name + " (seed " + seed + "):" + failures);
        }
    }

    /** Why {@code got} is not an acceptable result for ref ± bound stored as d, or null if it is. */
    static String outOfBounds(DType d, double ref, double bound, double got) {
        if (Double.isNaN(ref) || Double.isInfinite(ref)) {
            boolean same = Double.isNaN(ref) ? Double.isNaN(got) : got == ref;
            return same ? null : got + ", expected exactly " + ref;
        }
        double lo = d == DType.I32 ? ref - bound : d.round(floatBelow(ref - bound));
        double hi = d == DType.I32 ? ref + bound : d.round(floatAbove(ref + bound));
        if (got >= lo && got <= hi) {
            return null;
        }
        return got + ", reference " + ref + " ± " + bound + " stored as " + d + " is [" + lo + ", " + hi + "]";
    }

    /** The largest float ≤ x. */
    static float floatBelow(double x) {
        float f = (float) x;
        return f > x ? Math.nextDown(f) : f;
    }

    /** The smallest float ≥ x. */
    static float floatAbove(double x) {
        float f = (float) x;
        return f < x ? Math.nextUp(f) : f;
    }

    /** Whether this case launched each of its subjects (one that does not cannot count as its test). */
    boolean launchesSubjects() {
        return subjects.stream().allMatch(s -> device.launches().stream().anyMatch(l -> l.kernel().equals(s)));
    }

    @Override
    public String toString() {
        return name;
    }
}
