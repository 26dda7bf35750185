// Whether this Java runtime can draw train's PNG charts: they need java.desktop (AWT), which a
// jlinked runtime may leave out (the GPU bundle's does: the module is 11 MiB and the bundle has a
// size limit). Without it a run writes everything but the charts and says so in one line. This
// class names no chart class, so asking never loads the chart library.
package org.fsdp4j.cli;

final class ChartSupport {

    private ChartSupport() {
    }

    /** True when the java.desktop module is in the running JVM's boot layer. */
    static boolean available() {
        return ModuleLayer.boot().findModule("java.desktop").isPresent();
    }
}
