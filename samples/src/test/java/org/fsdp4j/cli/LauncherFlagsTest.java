// The container image once started the JVM without the Vector API module and the memory flags
// that ./fsdp4j passes, and nothing noticed. Both now run scripts/launcher.sh; this test fails when
// either stops doing so, and runs that launcher (with a java that only echoes its command line)
// the way ./fsdp4j does and the way the image does, to check that both get the same JVM flags.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LauncherFlagsTest {

    private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
    private static final Path LAUNCHER = ROOT.resolve("scripts/launcher.sh");

    @TempDir
    Path tmp;

    @Test
    void theRepositoryScriptStartsJavaOnlyThroughTheLauncher() throws IOException {
        List<String> code = codeLines(Files.readString(ROOT.resolve("fsdp4j")));
        assertTrue(code.stream().anyMatch(l -> l.matches(".*exec \"\\$root/scripts/launcher.sh\" \"\\$@\".*")),
                "./fsdp4j must exec scripts/launcher.sh");
        assertTrue(code.stream().noneMatch(l -> l.matches("(.*[\\s;&|(])?(exec\\s+)?java\\s.*")),
                "./fsdp4j must not start java itself: " + code);
    }

    @Test
    void theImageInstallsTheLauncherAsItsEntryPoint() throws IOException {
        List<String> runtime = runtimeStage();
        assertTrue(runtime.contains("COPY scripts/launcher.sh /usr/local/bin/fsdp4j"),
                "the image's /usr/local/bin/fsdp4j must be scripts/launcher.sh: " + runtime);
        assertTrue(runtime.contains("ENTRYPOINT [\"fsdp4j\"]"), "the entry point must be fsdp4j");
        assertTrue(runtime.stream().noneMatch(l -> l.contains("/usr/local/bin/fsdp4j") && !l.startsWith("COPY scripts/launcher.sh")
                        && !l.startsWith("RUN chmod 755 /usr/local/bin/fsdp4j")),
                "nothing else may write the image's launcher: " + runtime);
        assertTrue(runtime.stream().noneMatch(l -> l.matches("(RUN|ENTRYPOINT|CMD).*\\bjava\\b.*")),
                "the image must not start java another way: " + runtime);
    }

    @Test
    void theRepositoryAndTheImageStartTheJvmWithTheSameFlags() throws Exception {
        Map<String, String> image = imageEnvironment();
        assertTrue(image.containsKey("FSDP4J_JAR") && image.containsKey("FSDP4J_JAVA"), "image ENV: " + image);

        Map<String, String> repo = Map.of("FSDP4J_JAR", ROOT.resolve("samples/target/fsdp4j.jar").toString());
        Map<String, String> inImage = new LinkedHashMap<>(image);
        inImage.remove("FSDP4J_JAVA");   // replaced by the echoing java below

        Launch fromRepo = launch(repo);
        Launch fromImage = launch(inImage);

        for (String flag : List.of("-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "jdk.incubator.vector", "-XX:+UseSerialGC",
                "-Xmn32m", "-XX:+UseCountedLoopSafepoints", "org.fsdp4j.cli.Main")) {
            assertTrue(fromRepo.args.contains(flag), flag + " missing from ./fsdp4j's command line: " + fromRepo.args);
        }
        assertEquals(jvmFlags(fromRepo.args, null), jvmFlags(fromImage.args, image.get("FSDP4J_NATIVE_DIR")),
                "./fsdp4j and the image must start the JVM with the same flags");
        assertEquals(List.of("train", "--steps", "1"), fromImage.args.subList(fromImage.args.size() - 3, fromImage.args.size()));
        assertEquals("1", fromRepo.ncclOrder);
        assertEquals("1", fromImage.ncclOrder);

        if (image.containsKey("FSDP4J_NATIVE_DIR")) {
            String dir = image.get("FSDP4J_NATIVE_DIR");
            assertTrue(fromImage.args.contains("-Djava.library.path=" + dir), fromImage.args.toString());
            assertTrue(fromImage.args.contains("-Dorg.bytedeco.javacpp.pathsFirst=true"), fromImage.args.toString());
        }
        assertFalse(fromRepo.args.contains("-Dorg.bytedeco.javacpp.pathsFirst=true"));
    }

    @Test
    void aCollectorChosenInTheOptionsReplacesTheDefaultOne() throws Exception {
        Launch l = launch(Map.of("FSDP4J_JAR", "x.jar", "FSDP4J_JAVA_OPTS", "-XX:+UseG1GC -Xmx1g"));
        assertFalse(l.args.contains("-XX:+UseSerialGC"), l.args.toString());
        assertTrue(l.args.containsAll(List.of("-XX:+UseG1GC", "-Xmx1g")), l.args.toString());
    }

    /** The flags before the main class, without the class path and the native-folder pair (where the jar and its libraries are). */
    private static List<String> jvmFlags(List<String> args, String nativeDir) {
        List<String> flags = new ArrayList<>();
        for (int i = 0; i < args.size(); i++) {
            String a = args.get(i);
            if (a.equals("org.fsdp4j.cli.Main")) {
                return flags;
            }
            if (a.equals("-cp")) {
                i++;
                continue;
            }
            if (nativeDir != null && (a.equals("-Djava.library.path=" + nativeDir) || a.equals("-Dorg.bytedeco.javacpp.pathsFirst=true"))) {
                continue;
            }
            flags.add(a);
        }
        throw new AssertionError("no main class in " + args);
    }

    private record Launch(List<String> args, String ncclOrder) {
    }

    /** Runs the launcher with a java that prints its arguments, one per line, then NCCL_LAUNCH_ORDER_IMPLICIT. */
    private Launch launch(Map<String, String> env) throws Exception {
        Path java = tmp.resolve("java");
        Files.writeString(java, "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"
                + "printf 'NCCL=%s\\n' \"$NCCL_LAUNCH_ORDER_IMPLICIT\"\n");
        Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwxr-xr-x"));
        ProcessBuilder pb = new ProcessBuilder("sh", LAUNCHER.toString(), "train", "--steps", "1").redirectErrorStream(true);
        pb.environment().keySet().removeIf(k -> k.startsWith("FSDP4J_") || k.equals("NCCL_LAUNCH_ORDER_IMPLICIT"));
        pb.environment().putAll(env);
        pb.environment().put("FSDP4J_JAVA", java.toString());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        List<String> lines = new ArrayList<>(out.lines().toList());
        String nccl = lines.remove(lines.size() - 1);
        assertTrue(nccl.startsWith("NCCL="), out);
        return new Launch(lines, nccl.substring("NCCL=".length()));
    }

    /** The Dockerfile's last stage, one logical line per instruction (continuations joined), comments dropped. */
    private static List<String> runtimeStage() throws IOException {
        List<String> instructions = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        for (String line : Files.readAllLines(ROOT.resolve("Dockerfile"))) {
            String t = line.strip();
            if (t.startsWith("#") || (t.isEmpty() && cur.length() == 0)) {
                continue;
            }
            boolean more = t.endsWith("\\");
            cur.append(more ? t.substring(0, t.length() - 1).strip() + " " : t);
            if (!more) {
                instructions.add(cur.toString().strip());
                cur.setLength(0);
            }
        }
        int last = 0;
        for (int i = 0; i < instructions.size(); i++) {
            if (instructions.get(i).startsWith("FROM ")) {
                last = i;
            }
        }
        return instructions.subList(last, instructions.size());
    }

    /** FSDP4J_* variables the image's ENV sets. */
    private static Map<String, String> imageEnvironment() throws IOException {
        Map<String, String> env = new LinkedHashMap<>();
        Pattern kv = Pattern.compile("(FSDP4J_[A-Z_]+)=(\\S+)");
        for (String line : runtimeStage()) {
            if (line.startsWith("ENV ")) {
                Matcher m = kv.matcher(line);
                while (m.find()) {
                    env.put(m.group(1), m.group(2));
                }
            }
        }
        return env;
    }

    private static List<String> codeLines(String script) {
        return script.lines().map(String::strip).filter(l -> !l.isEmpty() && !l.startsWith("#")).toList();
    }
}
