// Emulator cases for rope.cu through RopeLauncher: the forward and the backward (the inverse turn)
// on head-major (B, H, T, D), out of place with a dtype change and in place (out = inp: one thread
// reads both halves of its pair before writing them), tables longer than T (row t must be position
// t of each (B, H) block), D = 2 with T = 1, and several blocks of pairs. The tables hold the
// cosine and sine of random angles; references follow the kernel's fp32 order (Approx).
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class RopeCases {

    private RopeCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(rope(r, DType.F32, DType.F32, 2, 3, 5, 8, 1f, false));
        out.add(rope(r, DType.BF16, DType.BF16, 2, 3, 5, 8, -1f, true));
        out.add(rope(r, DType.F16, DType.BF16, 1, 2, 1, 2, 1f, false));
        out.add(rope(r, DType.F32, DType.F32, 2, 4, 33, 64, -1f, true));
        out.add(rope(r, DType.BF16, DType.F32, 3, 2, 17, 6, 1f, false));
        return out;
    }

    private static EmuCase rope(Random r, DType inDt, DType outDt, int b, int h, int t, int d, float sign,
                                boolean inPlace) {
        EmuCase c = new EmuCase("rope_kernel", (sign > 0 ? "forward " : "backward ") + inDt + "->"
                + (inPlace ? "in place" : outDt.toString()) + " B=" + b + " H=" + h + " T=" + t + " D=" + d);
        int half = d / 2;
        int positions = t + 2;   // longer than T: only the first T rows may be read
        Tensor inp = c.device.allocate(inDt, b, h, t, d);
        Tensor out = inPlace ? inp : c.device.allocate(outDt, b, h, t, d);
        Tensor cos = c.device.allocate(DType.F32, positions, half);
        Tensor sin = c.device.allocate(DType.F32, positions, half);
        double[] x = c.device.put(inp, EmuData.uniform(r, b * h * t * d, 4));
        double[] angle = EmuData.uniform(r, positions * half, 40);
        double[] cv = new double[angle.length];
        double[] sv = new double[angle.length];
        for (int i = 0; i < angle.length; i++) {
            cv[i] = Math.cos(angle[i]);
            sv[i] = Math.sin(angle[i]);
        }
        cv = c.device.put(cos, cv);
        sv = c.device.put(sin, sv);
        new RopeLauncher(c.device).rope(null, inp, cos, sin, out, (long) b * h * t, t, half, sign);

        Approx[] ref = new Approx[x.length];
        for (int row = 0; row < b * h * t; row++) {
            int pos = row % t;
            for (int j = 0; j < half; j++) {
                Approx x1 = Approx.exact(x[row * d + j]);
                Approx x2 = Approx.exact(x[row * d + j + half]);
                Approx cs = Approx.exact(cv[pos * half + j]);
                Approx sn = Approx.exact(sign * sv[pos * half + j]);
                ref[row * d + j] = x1.times(cs).minus(x2.times(sn));
                ref[row * d + j + half] = x2.times(cs).plus(x1.times(sn));
            }
        }
        c.expect("out", out, ref);
        return c;
    }
}
