// The command line has no back door into the engine: it trains through org.fsdp4j.api
// (Fsdp.shard, ShardedModel) like any user, so no source of it names the engine's package
// (org.fsdp4j.fsdp). Other internal packages (the trainer, the benchmarks, the rendezvous) are
// the runtime's own tools and stay allowed.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class CommandLineUsesTheApiTest {

    @Test
    void noCommandLineSourceNamesTheEnginesPackage() throws IOException {
        Pattern engine = Pattern.compile("org\\.fsdp4j\\.fsdp\\.\\w+");
        List<Path> files;
        try (Stream<Path> walk = Files.walk(Path.of("src/main/java/org/fsdp4j/cli"))) {
            files = walk.filter(p -> p.toString().endsWith(".java")).toList();
        }
        assertTrue(files.size() > 10, "the command line's sources not found from " + Path.of("").toAbsolutePath());
        for (Path f : files) {
            Matcher m = engine.matcher(Files.readString(f));
            assertFalse(m.find(), () -> f + " names " + m.group() + ": the command line reaches the engine only"
                    + " through org.fsdp4j.api");
        }
    }
}
