// The README's library example is code, not prose: this test takes the java block after the
// README's snippet marker, compiles it against the module's class path (imports on top, the
// rest as a method body) and runs it, so the README cannot drift from the API.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReadmeSnippetTest {

    static final String MARKER = "<!-- README snippet: ReadmeSnippetTest compiles and runs the block below -->";

    /** The snippet's lines: the java block right after the marker. */
    static List<String> snippet() throws Exception {
        List<String> lines = Files.readAllLines(Path.of("..", "README.md"));
        int at = lines.indexOf(MARKER);
        assertTrue(at >= 0, "README.md has no line " + MARKER);
        assertEquals("```java", lines.get(at + 1), "the marker must be followed by a java block");
        List<String> out = new ArrayList<>();
        for (int i = at + 2; !lines.get(i).equals("```"); i++) {
            out.add(lines.get(i));
        }
        return out;
    }

    @Test
    void theReadmeExampleCompilesAndTrains(@TempDir Path dir) throws Exception {
        List<String> imports = new ArrayList<>();
        List<String> body = new ArrayList<>();
        for (String l : snippet()) {
            (l.startsWith("import ") ? imports : body).add(l);
        }
        String source = String.join("\n", imports) + "\n\npublic class ReadmeSnippet {\n"
                + "    public static void run() throws Exception {\n        " + String.join("\n        ", body)
                + "\n    }\n}\n";
        Path file = dir.resolve("ReadmeSnippet.java");
        Files.writeString(file, source);
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream diagnostics = new ByteArrayOutputStream();
        int rc = javac.run(null, null, diagnostics, "-d", dir.toString(), "-cp", System.getProperty("java.class.path"),
                "-Xlint:all,-path", "-Werror", file.toString());
        assertEquals(0, rc, "the README snippet does not compile:\n" + diagnostics.toString(StandardCharsets.UTF_8)
                + "\n" + source);
        PrintStream stdout = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try (URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()}, getClass().getClassLoader())) {
            Method run = loader.loadClass("ReadmeSnippet").getMethod("run");
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            run.invoke(null);
        } finally {
            System.setOut(stdout);
        }
        String out = printed.toString(StandardCharsets.UTF_8);
        assertTrue(out.contains("step 9 loss "), "the snippet's loop ran its 10 steps:\n" + out);
    }
}
