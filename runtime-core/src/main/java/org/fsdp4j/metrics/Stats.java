// The few statistics reports need; the median is what step times are summarised with, since
// a shared machine adds long outliers that would drag a mean.
package org.fsdp4j.metrics;

import java.util.Arrays;

public final class Stats {

    private Stats() {
    }

    /** Median of a non-empty sample (mean of the two middle values for an even count). */
    public static double median(double[] values) {
        if (values.length == 0) {
            throw new IllegalArgumentException("median of an empty sample");
        }
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int mid = sorted.length / 2;
        return sorted.length % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    }

    /** Mean of the last {@code count} values (all of them if there are fewer). */
    public static double tailMean(float[] values, int count) {
        if (values.length == 0 || count < 1) {
            throw new IllegalArgumentException("tail mean needs values and a count >= 1");
        }
        int from = Math.max(0, values.length - count);
        double sum = 0;
        for (int i = from; i < values.length; i++) {
            sum += values[i];
        }
        return sum / (values.length - from);
    }
}
