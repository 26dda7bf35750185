// Inputs for the emulator cases: fresh random values (a case's seed reproduces them), edge values
// placed at both ends of a buffer (so they land in the first block and in the last, partial
// one), and exact references for values that need none.
package org.fsdp4j.cuda;

import java.util.Random;

final class EmuData {

    private EmuData() {
    }

    /** n values uniform in [−scale, scale). */
    static double[] uniform(Random r, int n, double scale) {
        double[] v = new double[n];
        for (int i = 0; i < n; i++) {
            v[i] = (r.nextDouble() * 2 - 1) * scale;
        }
        return v;
    }

    /** n values uniform in [lo, hi). */
    static double[] uniform(Random r, int n, double lo, double hi) {
        double[] v = new double[n];
        for (int i = 0; i < n; i++) {
            v[i] = lo + r.nextDouble() * (hi - lo);
        }
        return v;
    }

    /** values with edges[k] written at k from the start and at k from the end. */
    static double[] withEdges(double[] values, double... edges) {
        if (2 * edges.length > values.length) {
            throw new IllegalArgumentException(edges.length + " edges do not fit twice in " + values.length + " values");
        }
        double[] v = values.clone();
        for (int k = 0; k < edges.length; k++) {
            v[k] = edges[k];
            v[v.length - 1 - k] = edges[k];
        }
        return v;
    }

    static Approx[] exact(double[] v) {
        Approx[] a = new Approx[v.length];
        for (int i = 0; i < v.length; i++) {
            a[i] = Approx.exact(v[i]);
        }
        return a;
    }

    static int[] ints(Random r, int n, int lo, int hi) {
        int[] v = new int[n];
        for (int i = 0; i < n; i++) {
            v[i] = lo + r.nextInt(hi - lo);
        }
        return v;
    }
}
