// The module descriptors are the API's wall: a program on the module path sees org.fsdp4j.api and
// the two SPI packages, nothing else of the engine. The descriptors are also complete: fsdp4j runs
// as modules (train with a checkpoint and a resume, a two-process launch, a tokenization through
// DJL's automatic module, the library example), which fails on a missing requires, opens
// (Jackson, picocli) or provides (the ServiceLoader entries). Everything else in the suite runs
// on the class path, as the shaded jar does.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.jar.JarFile;
import java.util.stream.Collectors;
import org.fsdp4j.data.TestTokenizers;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModulesTest {

    private static final List<String> RUN = List.of("--device", "cpu", "--preset", "tiny", "--batch-size", "8",
            "--seq-len", "32", "--cpu-threads", "2", "--collective-timeout", "30");

    /** The command line's main class, named as a module's. */
    private static final String MAIN = "org.fsdp4j.cli/org.fsdp4j.cli.Main";

    @TempDir
    Path dir;

    @Test
    void onlyTheApiAndTheSpiAreExportedToEveryone() {
        Map<String, ModuleDescriptor> ours = new TreeMap<>();
        for (ModuleReference r : ModuleFinder.of(modulePath().toArray(Path[]::new)).findAll()) {
            if (r.descriptor().name().startsWith("org.fsdp4j.")) {
                ours.put(r.descriptor().name(), r.descriptor());
            }
        }
        assertEquals(Set.of("org.fsdp4j.core", "org.fsdp4j.cuda", "org.fsdp4j.nccl", "org.fsdp4j.cli"), ours.keySet());
        Map<String, Set<String>> open = new TreeMap<>();
        Set<String> ourNames = ours.keySet();
        for (ModuleDescriptor d : ours.values()) {
            for (ModuleDescriptor.Exports e : d.exports()) {
                if (!e.isQualified()) {
                    open.computeIfAbsent(d.name(), k -> new TreeSet<>()).add(e.source());
                } else {
                    assertTrue(ourNames.containsAll(e.targets()), d.name() + " exports " + e.source()
                            + " to modules other than fsdp4j's: " + e.targets());
                }
            }
        }
        assertEquals(Map.of("org.fsdp4j.core", Set.of("org.fsdp4j.api", "org.fsdp4j.backend", "org.fsdp4j.comm")), open);
    }

    @Test
    void fsdp4jRunsAsModules() throws Exception {
        Path out = dir.resolve("out");
        Path saves = dir.resolve("saves");
        String[] run = RUN.toArray(String[]::new);
        ChildJvm first = start("train.err", MAIN, MultiProcessCommandTest.args(List.of("train", "--steps", "2",
                "--save-dir", saves.toString(), "--save-every", "2", "--out", out.toString()), run));
        assertEquals(0, first.exit(120), first.stderr());
        assertTrue(Files.exists(out.resolve("summary.json")), "summary.json (Jackson through the opens)");

        ChildJvm resumed = start("resume.err", MAIN, MultiProcessCommandTest.args(List.of("train", "--steps", "3",
                "--save-dir", saves.toString(), "--resume", "latest"), run));
        assertEquals(0, resumed.exit(120), resumed.stderr());

        ChildJvm launched = start("launch.err", MAIN, MultiProcessCommandTest.args(List.of("launch", "--standalone",
                "--nproc-per-node", "2", "--", "train", "--steps", "2", "--world-size", "4"), run));
        assertEquals(0, launched.exit(120), launched.stderr());

        // DJL's tokenizers (an automatic module) and their native library, from the module path.
        Path text = Files.writeString(dir.resolve("text.txt"), "Hello world, as modules.\n".repeat(20));
        ChildJvm tokenized = start("tokenize.err", MAIN, List.of("data", "tokenize",
                "--tokenizer", TestTokenizers.gpt2(dir).toString(), "--out", dir.resolve("shards").toString(), text.toString()));
        assertEquals(0, tokenized.exit(120), tokenized.stderr());
        assertTrue(Files.exists(dir.resolve("shards").resolve("train_000000.bin")), "train_000000.bin");

        ChildJvm example = start("mixer.err", "org.fsdp4j.cli/example.mixer.MlpMixer", List.of("2", "2"));
        example.await("step 2 loss");
        assertEquals(0, example.exit(120), example.stderr());
    }

    private ChildJvm start(String err, String main, List<String> args) throws IOException {
        String path = modulePath().stream().map(Path::toString).collect(Collectors.joining(File.pathSeparator));
        return ChildJvm.startModule(dir.resolve(err), path, main, args);
    }

    /**
     * The test's class path without what only tests use (test classes, test jars, JUnit and the
     * surefire booter): fsdp4j's modules and the libraries they require, as a user's module path
     * holds them. Surefire may hand the class path over in a manifest-only jar; its Class-Path is read.
     */
    private static List<Path> modulePath() {
        List<Path> entries = new ArrayList<>();
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path p = Path.of(e);
            if (e.endsWith(".jar") && p.getFileName().toString().startsWith("surefirebooter")) {
                entries.addAll(manifestClassPath(p));
            } else {
                entries.add(p);
            }
        }
        List<Path> kept = new ArrayList<>();
        for (Path p : entries) {
            String s = p.toString().replace('\\', '/');
            if (s.contains("/test-classes") || s.endsWith("-tests.jar") || s.contains("/org/junit/")
                    || s.contains("/org/opentest4j/") || s.contains("/org/apiguardian/") || s.contains("surefire")) {
                continue;
            }
            if (Files.exists(p)) {
                kept.add(p);
            }
        }
        return kept;
    }

    private static List<Path> manifestClassPath(Path booter) {
        try (JarFile jar = new JarFile(booter.toFile())) {
            String cp = jar.getManifest().getMainAttributes().getValue("Class-Path");
            List<Path> out = new ArrayList<>();
            for (String u : cp.trim().split("\\s+")) {
                out.add(Path.of(URI.create(u)));
            }
            return out;
        } catch (IOException e) {
            throw new AssertionError("cannot read the class path from " + booter, e);
        }
    }
}
