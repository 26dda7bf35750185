// Package cycles in runtime-core's compiled classes, found by the JDK's jdeps: packages in a cycle
// cannot be understood, tested or moved apart. There are none: the API (the model contract and
// the facade) imports nothing of the engine, which reaches it through FsdpRuntime; plan and bench
// import train, never the reverse. A cycle fails naming its packages and the edges that close it.
package org.fsdp4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;
import org.junit.jupiter.api.Test;

class PackageCyclesTest {


    private static final Pattern EDGE = Pattern.compile("^\\s+org\\.fsdp4j\\.([a-z0-9.]+)\\s+->\\s+org\\.fsdp4j\\.([a-z0-9.]+)\\s");

    @Test
    void thereIsNoPackageCycle() {
        Map<String, Set<String>> edges = packageEdges(Path.of("target", "classes"));
        assertTrue(edges.containsKey("train") && edges.containsKey("api"), "jdeps read the classes: " + edges.keySet());
        assertEquals(Set.of(), edges.get("api"), "the API imports nothing of the engine");
        List<Set<String>> cycles = stronglyConnected(edges);
        List<String> wrong = new ArrayList<>();
        for (Set<String> c : cycles) {
            wrong.add("a cycle among " + c + " (edges inside it: " + inside(edges, c) + ")");
        }
        assertEquals(List.of(), wrong, "package cycles in runtime-core");
    }

    /** package → packages it uses (within org.fsdp4j, itself excluded), from jdeps -verbose:package. */
    static Map<String, Set<String>> packageEdges(Path classes) {
        ToolProvider jdeps = ToolProvider.findFirst("jdeps")
                .orElseThrow(() -> new AssertionError("the JDK's jdeps tool is missing (module jdk.jdeps)"));
        assertTrue(Files.isDirectory(classes), classes + " (run from the module's directory, after compiling)");
        StringWriter out = new StringWriter();
        int code = jdeps.run(new PrintWriter(out), new PrintWriter(out), "-verbose:package", "-filter:none",
                withoutModuleDescriptor(classes).toString());
        assertEquals(0, code, out.toString());
        Map<String, Set<String>> edges = new TreeMap<>();
        for (String line : out.toString().split("\n")) {
            Matcher m = EDGE.matcher(line);
            if (m.find() && !m.group(1).equals(m.group(2))) {
                edges.computeIfAbsent(m.group(1), k -> new TreeSet<>()).add(m.group(2));
                edges.computeIfAbsent(m.group(2), k -> new TreeSet<>());
            }
        }
        return edges;
    }

    /**
     * A copy of {@code classes} without module-info.class: jdeps reads a folder with a descriptor as
     * a module and would need every module it requires; the package edges are all this test wants.
     */
    private static Path withoutModuleDescriptor(Path classes) {
        try {
            Path copy = Files.createTempDirectory("package-cycles");
            try (java.util.stream.Stream<Path> walk = Files.walk(classes)) {
                for (Path f : (Iterable<Path>) walk.filter(f -> f.toString().endsWith(".class")
                        && !f.getFileName().toString().equals("module-info.class"))::iterator) {
                    Path to = copy.resolve(classes.relativize(f).toString());
                    Files.createDirectories(to.getParent());
                    Files.copy(f, to);
                }
            }
            return copy;
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** The strongly connected components of more than one package (Tarjan's algorithm). */
    static List<Set<String>> stronglyConnected(Map<String, Set<String>> edges) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<Set<String>> out = new ArrayList<>();
        int[] next = {0};
        for (String v : edges.keySet()) {
            if (!index.containsKey(v)) {
                visit(v, edges, index, low, stack, onStack, out, next);
            }
        }
        return out;
    }

    private static void visit(String v, Map<String, Set<String>> edges, Map<String, Integer> index,
                              Map<String, Integer> low, Deque<String> stack, Set<String> onStack,
                              List<Set<String>> out, int[] next) {
        index.put(v, next[0]);
        low.put(v, next[0]);
        next[0]++;
        stack.push(v);
        onStack.add(v);
        for (String w : edges.getOrDefault(v, Set.of())) {
            if (!index.containsKey(w)) {
                visit(w, edges, index, low, stack, onStack, out, next);
                low.put(v, Math.min(low.get(v), low.get(w)));
            } else if (onStack.contains(w)) {
                low.put(v, Math.min(low.get(v), index.get(w)));
            }
        }
        if (low.get(v).equals(index.get(v))) {
            Set<String> component = new TreeSet<>();
            String w;
            do {
                w = stack.pop();
                onStack.remove(w);
                component.add(w);
            } while (!w.equals(v));
            if (component.size() > 1) {
                out.add(component);
            }
        }
    }

    private static List<String> inside(Map<String, Set<String>> edges, Set<String> component) {
        List<String> e = new ArrayList<>();
        for (String a : component) {
            for (String b : edges.get(a)) {
                if (component.contains(b)) {
                    e.add(a + "→" + b);
                }
            }
        }
        return e;
    }
}
