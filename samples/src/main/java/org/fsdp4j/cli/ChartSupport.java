// Whether this Java runtime can draw train's PNG charts: they need java.desktop (AWT), which a
// jlinked runtime may leave out (the GPU bundle's does: the module is 11 MiB and the bundle has a
// size limit), and AWT's font libraries (FreeType, HarfBuzz, fontconfig and a font), which a slim
// container may lack. Without them a run writes everything but the charts and says so in one line.
// This class names no chart class, so asking never loads the chart library.
package org.fsdp4j.cli;

import java.util.Optional;

final class ChartSupport {

    private ChartSupport() {
    }

    /** Empty when charts can be drawn; otherwise why not, in a phrase that names the fix. */
    static Optional<String> missing() {
        if (ModuleLayer.boot().findModule("java.desktop").isEmpty()) {
            return Optional.of("this Java runtime has no java.desktop module, which drawing them needs");
        }
        return Text.PROBLEM;
    }

    /** Measures one string once; AWT loads its font libraries on the first text it lays out. */
    private static final class Text {
        static final Optional<String> PROBLEM = probe();

        private static Optional<String> probe() {
            System.setProperty("java.awt.headless", "true");
            try {
                java.awt.Graphics2D g = new java.awt.image.BufferedImage(1, 1, java.awt.image.BufferedImage.TYPE_INT_RGB)
                        .createGraphics();
                try {
                    g.getFontMetrics(new java.awt.Font(java.awt.Font.SANS_SERIF, java.awt.Font.PLAIN, 12)).stringWidth("loss");
                } finally {
                    g.dispose();
                }
                return Optional.empty();
            } catch (VirtualMachineError e) {
                throw e;
            } catch (Error | RuntimeException e) {   // UnsatisfiedLinkError, AWTError, "no fonts found"
                return Optional.of("Java cannot draw text here: " + e.getMessage()
                        + "; install FreeType, HarfBuzz, fontconfig and a font (Debian/Ubuntu: libfreetype6 libharfbuzz0b"
                        + " libfontconfig1 fonts-dejavu-core)");
            }
        }
    }
}
