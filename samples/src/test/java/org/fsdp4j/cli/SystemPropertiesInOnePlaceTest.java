// Every -Dfsdp4j.* switch is named in Fsdp4jSystemProperties and nowhere else in the main code of
// any module, so that class's list is the whole list a user can set.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class SystemPropertiesInOnePlaceTest {

    @Test
    void onlyFsdp4jSystemPropertiesNamesASwitch() throws IOException {
        Pattern name = Pattern.compile("\"fsdp4j\\.[A-Za-z][A-Za-z0-9._]*\"");
        List<String> elsewhere = new ArrayList<>();
        int files = 0;
        for (String module : List.of("runtime-core", "cuda-kernels", "nccl-comm", "samples")) {
            try (Stream<Path> walk = Files.walk(Path.of("..", module, "src", "main", "java"))) {
                for (Path f : (Iterable<Path>) walk.filter(p -> p.toString().endsWith(".java"))::iterator) {
                    files++;
                    if (f.getFileName().toString().equals("Fsdp4jSystemProperties.java")) {
                        continue;
                    }
                    Matcher m = name.matcher(Files.readString(f));
                    while (m.find()) {
                        elsewhere.add(f + ": " + m.group());
                    }
                }
            }
        }
        assertTrue(files > 300, "the main sources were not found from " + Path.of("").toAbsolutePath());
        assertEquals(List.of(), elsewhere, "system properties named outside org.fsdp4j.backend.Fsdp4jSystemProperties");
    }
}
