// The BOM a user imports names every library module at the reactor's version: a module added to
// the build, or a version bumped in one place only, fails here instead of in a user's build.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class BomTest {

    /** The library modules: every module of the reactor but the BOM itself and the command line. */
    static final List<String> LIBRARIES = List.of("runtime-core", "cuda-kernels", "nccl-comm");

    @Test
    void theBomNamesEveryLibraryModuleAtTheReactorsVersion() throws Exception {
        String parent = Files.readString(Path.of("..", "pom.xml"));
        String bom = Files.readString(Path.of("..", "bom", "pom.xml"));
        String version = first(parent, "<artifactId>fsdp4j-parent</artifactId>\\s*<version>([^<]+)</version>");
        assertEquals(version, first(bom, "<artifactId>fsdp4j-bom</artifactId>\\s*<version>([^<]+)</version>"),
                "bom/pom.xml's version");
        List<String> modules = new ArrayList<>();
        Matcher m = Pattern.compile("<module>([^<]+)</module>").matcher(parent);
        while (m.find()) {
            modules.add(m.group(1));
        }
        assertEquals(List.of("bom", "runtime-core", "cuda-kernels", "nccl-comm", "samples"), modules,
                "a new module: add it to the BOM if users depend on it, and to this list");
        List<String> managed = new ArrayList<>();
        Matcher d = Pattern.compile("<artifactId>([^<]+)</artifactId>\\s*<version>\\$\\{project.version}</version>")
                .matcher(bom);
        while (d.find()) {
            managed.add(d.group(1));
        }
        assertEquals(LIBRARIES, managed, "the BOM's modules");
    }

    private static String first(String text, String regex) {
        Matcher m = Pattern.compile(regex).matcher(text);
        if (!m.find()) {
            throw new AssertionError("no match for " + regex);
        }
        return m.group(1);
    }
}
