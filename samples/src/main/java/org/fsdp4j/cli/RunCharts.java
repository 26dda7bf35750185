// The PNGs a training run leaves in --out, drawn with JFreeChart (headless): loss.png, the loss of
// every step with the data's entropy floor when it is known and, with --eval-every, the validation
// loss as marked points joined by a line on the steps it was measured after, and memory.png, each rank's live
// bytes by category over the first step this process ran (one stacked panel per rank, time on the
// x axis), which shows where the peak comes from: the persistent state at the bottom, the
// gathered units and gradients coming and going, the activations rising through the forward
// and falling through the backward. In a run over several processes that is process 0's ranks
// (a step's every allocation stays in the process that made it); the title says so.
package org.fsdp4j.cli;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.train.TrainSummary;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.plot.CombinedDomainXYPlot;
import org.jfree.chart.plot.ValueMarker;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.StackedXYAreaRenderer2;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.chart.ui.RectangleAnchor;
import org.jfree.chart.ui.TextAnchor;
import org.jfree.data.xy.DefaultTableXYDataset;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

final class RunCharts {

    static final String LOSS_FILE = "loss.png";
    static final String MEMORY_FILE = "memory.png";
    /** Ranks drawn in memory.png (the others are like them: the ranks' memory is symmetric). */
    static final int MAX_RANKS_DRAWN = 8;

    private static final Color[] CATEGORY_COLORS = {new Color(0x4C72B0), new Color(0xDD8452), new Color(0x55A868),
        new Color(0xC44E52), new Color(0x8172B3), new Color(0x937860), new Color(0xDA8BC3), new Color(0x8C8C8C)};

    private RunCharts() {
    }

    static {
        System.setProperty("java.awt.headless", "true");
    }

    /** Writes loss.png and memory.png into {@code dir}; returns the files written. */
    static List<Path> write(Path dir, TrainSummary summary, List<List<long[]>> timelines) {
        List<Path> out = new ArrayList<>();
        try {
            if (summary.losses().length > 0) {
                Path loss = dir.resolve(LOSS_FILE);
                ChartUtils.saveChartAsPNG(loss.toFile(), lossChart(summary), 900, 500);
                out.add(loss);
            }
            if (!timelines.isEmpty() && timelines.get(0).size() > 1) {
                Path mem = dir.resolve(MEMORY_FILE);
                int panels = Math.min(MAX_RANKS_DRAWN, timelines.size());
                ChartUtils.saveChartAsPNG(mem.toFile(), memoryChart(summary, timelines), 1000, 180 + 220 * panels);
                out.add(mem);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the charts in " + dir + ": " + e.getMessage(), e);
        }
        return out;
    }

    private static JFreeChart lossChart(TrainSummary s) {
        XYSeries loss = new XYSeries("loss");
        float[] l = s.losses();
        for (int i = 0; i < l.length; i++) {
            if (Float.isFinite(l[i])) {
                loss.add(i + 1, l[i]);
            }
        }
        XYSeriesCollection curves = new XYSeriesCollection(loss);
        XYSeries val = new XYSeries("validation loss");
        if (s.valLosses() != null) {
            for (TrainSummary.ValLoss v : s.valLosses()) {
                if (Float.isFinite(v.valLoss())) {
                    val.add(v.step(), v.valLoss());
                }
            }
        }
        boolean validated = val.getItemCount() > 0;
        if (validated) {
            loss.setKey("training loss");
            curves.addSeries(val);
        }
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, false);
        XYPlot plot = new XYPlot(curves, new NumberAxis("step"), new NumberAxis("loss (nats)"), renderer);
        renderer.setSeriesPaint(0, CATEGORY_COLORS[0]);
        renderer.setSeriesStroke(0, new BasicStroke(1.5f));
        if (validated) {
            renderer.setSeriesPaint(1, CATEGORY_COLORS[1]);
            renderer.setSeriesStroke(1, new BasicStroke(2f));
            renderer.setSeriesShapesVisible(1, true);       // the measured points, between which nothing was measured
        }
        ((NumberAxis) plot.getRangeAxis()).setAutoRangeIncludesZero(false);
        if (s.lossFloor() != null) {
            ValueMarker floor = new ValueMarker(s.lossFloor(), CATEGORY_COLORS[3], new BasicStroke(1.5f,
                    BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f}, 0f));
            floor.setLabel(String.format(java.util.Locale.ROOT, "entropy floor %.4f nats", s.lossFloor()));
            floor.setLabelAnchor(RectangleAnchor.TOP_RIGHT);
            floor.setLabelTextAnchor(TextAnchor.BOTTOM_RIGHT);
            floor.setLabelFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
            plot.addRangeMarker(floor);
            double lo = Math.min(s.lossFloor(), validated ? Math.min(loss.getMinY(), val.getMinY()) : loss.getMinY());
            double hi = validated ? Math.max(loss.getMaxY(), val.getMaxY()) : loss.getMaxY();
            plot.getRangeAxis().setRange(lo - 0.05 * (hi - lo), hi + 0.02 * (hi - lo));
        }
        JFreeChart chart = new JFreeChart(String.format(java.util.Locale.ROOT, "%s: loss per step (%d steps, N = %d, %s)",
                s.preset(), s.steps(), s.worldSize(), s.strategy()), JFreeChart.DEFAULT_TITLE_FONT, plot, validated);
        chart.setBackgroundPaint(Color.WHITE);
        return chart;
    }

    private static JFreeChart memoryChart(TrainSummary s, List<List<long[]>> timelines) {
        NumberAxis time = new NumberAxis("time since the step started (ms)");
        CombinedDomainXYPlot combined = new CombinedDomainXYPlot(time);
        combined.setGap(12);
        MemoryCategory[] cats = MemoryCategory.values();
        long t0 = Long.MAX_VALUE;
        for (List<long[]> t : timelines) {
            if (!t.isEmpty()) {
                t0 = Math.min(t0, t.get(0)[0]);
            }
        }
        for (int r = 0; r < Math.min(MAX_RANKS_DRAWN, timelines.size()); r++) {
            DefaultTableXYDataset data = new DefaultTableXYDataset();
            List<long[]> events = timelines.get(r);
            for (int c = 0; c < cats.length; c++) {
                XYSeries series = new XYSeries(cats[c].label(), true, false);
                double lastX = Double.NEGATIVE_INFINITY;
                for (long[] e : events) {
                    double x = (e[0] - t0) / 1e6;
                    if (x <= lastX) {
                        x = Math.nextUp(lastX);           // a table dataset needs distinct x values
                    }
                    lastX = x;
                    series.add(x, e[1 + c] / (double) (1 << 20), false);
                }
                data.addSeries(series);
            }
            StackedXYAreaRenderer2 renderer = new StackedXYAreaRenderer2();
            for (int c = 0; c < cats.length; c++) {
                renderer.setSeriesPaint(c, CATEGORY_COLORS[c % CATEGORY_COLORS.length]);
            }
            NumberAxis mib = new NumberAxis("rank " + r + " (MiB)");
            XYPlot plot = new XYPlot(data, null, mib, renderer);
            combined.add(plot, 1);
            if (r == 0) {
                combined.setFixedLegendItems(plot.getLegendItems());     // one legend, not one per rank
            }
        }
        String title = String.format(java.util.Locale.ROOT, "%s: live memory by category over the first step, per rank"
                + " (N = %d, %s%s)", s.preset(), s.worldSize(), s.strategy(),
                timelines.size() > MAX_RANKS_DRAWN ? "; first " + MAX_RANKS_DRAWN + " ranks"
                        : timelines.size() < s.worldSize() ? "; process 0's ranks 0-" + (timelines.size() - 1) : "");
        JFreeChart chart = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, combined, true);
        chart.setBackgroundPaint(Color.WHITE);
        return chart;
    }
}
