// A run's resolved configuration as flat "key → value" text, so that the processes of a run can
// check they were started alike: a record's components by name (a nested record's as
// "model.numLayers", an Optional as its value or "none"; an options object with a builder, such as
// the FsdpOptions a TrainConfig holds, as "fsdp.prefetch", one key per value its builder sets),
// minus the keys that may differ from process to process (where this one writes, how many threads
// it takes). New configuration fields are covered without anyone listing them.
package org.fsdp4j.dist;

import java.lang.reflect.RecordComponent;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

public final class Settings {

    private Settings() {
    }

    /** {@code config}'s components flattened, without the top-level keys in {@code exclude}. */
    public static Map<String, String> of(Record config, Set<String> exclude) {
        Map<String, String> out = new LinkedHashMap<>();
        flatten("", config, exclude, out);
        return out;
    }

    private static void flatten(String prefix, Record r, Set<String> exclude, Map<String, String> out) {
        for (RecordComponent c : r.getClass().getRecordComponents()) {
            String key = prefix + c.getName();
            if (prefix.isEmpty() && exclude.contains(key)) {
                continue;
            }
            Object v;
            try {
                java.lang.reflect.Method accessor = c.getAccessor();
                accessor.trySetAccessible();      // a record nested in a class of another package
                v = accessor.invoke(r);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot read " + key + " of " + r.getClass().getSimpleName(), e);
            }
            if (v instanceof Optional<?> o) {
                v = o.orElse(null);
            }
            if (v instanceof Record nested) {
                flatten(key + ".", nested, Set.of(), out);
            } else if (v != null && builderOf(v.getClass()) != null) {
                flattenOptions(key + ".", v, exclude, out);
            } else {
                out.put(key, v == null ? "none" : String.valueOf(v));
            }
        }
    }

    /** The builder class of an options class (its public static builder()'s type), or null. */
    private static Class<?> builderOf(Class<?> type) {
        try {
            java.lang.reflect.Method m = type.getMethod("builder");
            return java.lang.reflect.Modifier.isStatic(m.getModifiers()) ? m.getReturnType() : null;
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    /**
     * An options object's values: each public no-argument accessor whose name its builder also has as
     * a one-argument setter (what a caller sets), in name order, without the names in {@code exclude};
     * values of plain types (numbers, flags, text, enums, durations, records) only.
     */
    private static void flattenOptions(String prefix, Object options, Set<String> exclude, Map<String, String> out) {
        Class<?> builder = builderOf(options.getClass());
        Set<String> setters = new TreeSet<>();
        for (java.lang.reflect.Method m : builder.getMethods()) {
            if (m.getParameterCount() == 1 && m.getReturnType() == builder) {
                setters.add(m.getName());
            }
        }
        for (String name : setters) {
            if (exclude.contains(name)) {
                continue;
            }
            Object v;
            try {
                v = options.getClass().getMethod(name).invoke(options);
            } catch (NoSuchMethodException e) {
                continue;                          // a setter of part of a value (paramDtype of precision)
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot read " + prefix + name, e);
            }
            if (v instanceof Record nested) {
                flatten(prefix + name + ".", nested, Set.of(), out);
            } else if (v instanceof Number || v instanceof Boolean || v instanceof CharSequence || v instanceof Enum<?>
                    || v instanceof java.time.Duration) {
                out.put(prefix + name, String.valueOf(v));
            }   // a source of values (initialValues) is not a setting: what it holds is checked where it is read
        }
    }

    /** "key\tvalue" lines (tabs and line breaks in values escaped), the form the store carries. */
    static String encode(Map<String, String> settings) {
        StringBuilder b = new StringBuilder();
        settings.forEach((k, v) -> b.append(escape(k)).append('\t').append(escape(v)).append('\n'));
        return b.toString();
    }

    static Map<String, String> decode(String text) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String line : text.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            int tab = line.indexOf('\t');
            out.put(unescape(line.substring(0, tab)), unescape(line.substring(tab + 1)));
        }
        return out;
    }

    /**
     * Null when every process has the same settings; otherwise one line per key that differs,
     * each value with the processes that have it: "lr: 0.001 (processes 0, 2), 0.002 (process 1)".
     */
    static String differences(Map<String, String>[] byProcess) {
        Collection<String> keys = new TreeSet<>();
        for (Map<String, String> m : byProcess) {
            keys.addAll(m.keySet());
        }
        StringBuilder b = new StringBuilder();
        for (String key : keys) {
            Map<String, TreeSet<Integer>> holders = new LinkedHashMap<>();
            for (int p = 0; p < byProcess.length; p++) {
                holders.computeIfAbsent(byProcess[p].getOrDefault(key, "(not set)"), v -> new TreeSet<>()).add(p);
            }
            if (holders.size() > 1) {
                b.append(b.length() == 0 ? "" : "; ").append(key).append(": ");
                int i = 0;
                for (Map.Entry<String, TreeSet<Integer>> e : holders.entrySet()) {
                    b.append(i++ > 0 ? ", " : "").append(e.getKey()).append(e.getValue().size() == 1 ? " (process " : " (processes ")
                            .append(e.getValue().toString().replaceAll("[\\[\\]]", "")).append(')');
                }
            }
        }
        return b.length() == 0 ? null : b.toString();
    }

    private static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n");
    }

    private static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 1 < s.length()) {
                char n = s.charAt(++i);
                b.append(n == 't' ? '\t' : n == 'n' ? '\n' : n);
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }
}
