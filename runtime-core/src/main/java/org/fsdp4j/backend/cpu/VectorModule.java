// Whether the JVM resolved the JDK's Vector API module, which the CPU backend's loops (Simd)
// need. Kept apart from Simd: Simd's static fields use the API, so touching Simd in a JVM
// without the module throws NoClassDefFoundError before any check inside it could run.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.backend.BackendUnavailableException;

final class VectorModule {

    static final String NAME = "jdk.incubator.vector";

    private VectorModule() {
    }

    /** Throws one sentence naming the flag when the module is not resolved. */
    static void require() {
        if (ModuleLayer.boot().findModule(NAME).isEmpty()) {
            throw new BackendUnavailableException("the CPU backend needs the JDK's Vector API: start the JVM with"
                    + " --add-modules " + NAME + " (the ./fsdp4j script and the Maven build pass it)");
        }
    }
}
