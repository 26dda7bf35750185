// A child JVM running org.fsdp4j.cli.Main on the test's classpath, as users start fsdp4j (the
// launcher, or one process of a run by hand), or a main class from a module path: its stdout
// lines queue up for the test to wait on, its stderr goes to a file. Variables that would make it one process of a run (torchrun's,
// Slurm's, Open MPI's, Kubernetes operators') are removed unless the test sets them, and so are
// the job token and bind variables (FSDP4J_JOB_TOKEN, FSDP4J_JOB_TOKEN_FILE, FSDP4J_*_BIND).
package org.fsdp4j.cli;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

record ChildJvm(Process process, BlockingQueue<String> lines, Path err) {

    /** Starts {@code args} with the variables {@code env} and the JVM options {@code jvm} (system properties). */
    static ChildJvm start(Path err, Map<String, String> env, List<String> jvm, List<String> args) throws IOException {
        return start(err, env, List.of(), jvm, args);
    }

    /** As above, the java command run by {@code prefix} ("unshare", "-rm", ...: a wrapper that execs its arguments). */
    static ChildJvm start(Path err, Map<String, String> env, List<String> prefix, List<String> jvm, List<String> args)
            throws IOException {
        List<String> cmd = new ArrayList<>(prefix);
        cmd.addAll(List.of(java(), "-cp", System.getProperty("java.class.path"),
                "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "--add-modules", "jdk.incubator.vector"));
        cmd.addAll(jvm);
        cmd.add(Main.class.getName());
        cmd.addAll(args);
        return run(err, env, cmd);
    }

    /**
     * {@code main} ("module/class") run from the module path {@code modulePath}, every module on it
     * resolved (JavaCPP's native libraries sit in platform modules nothing requires by name).
     */
    static ChildJvm startModule(Path err, String modulePath, String main, List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(java(), "-p", modulePath, "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0",
                "--add-modules", "jdk.incubator.vector,ALL-MODULE-PATH", "-m", main));
        cmd.addAll(args);
        return run(err, Map.of(), cmd);
    }

    private static String java() {
        return ProcessHandle.current().info().command().orElse("java");
    }

    private static ChildJvm run(Path err, Map<String, String> env, List<String> cmd) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(err.toFile());
        for (String v : List.of("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                "MASTER_PORT", "FSDP4J_JOB_TOKEN", "FSDP4J_JOB_TOKEN_FILE", "FSDP4J_STORE_BIND", "FSDP4J_PEER_BIND")) {
            pb.environment().remove(v);
        }
        pb.environment().keySet().removeIf(k -> k.startsWith("SLURM_") || k.startsWith("OMPI_") || k.startsWith("PET_"));
        pb.environment().putAll(env);
        Process p = pb.start();
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String l = r.readLine(); l != null; l = r.readLine()) {
                    lines.add(l);
                }
            } catch (IOException ignored) {
                // the child ended
            }
        });
        reader.setDaemon(true);
        reader.start();
        return new ChildJvm(p, lines, err);
    }

    /** As above without JVM options. */
    static ChildJvm start(Path err, Map<String, String> env, List<String> args) throws IOException {
        return start(err, env, List.of(), args);
    }

    /** Its exit code, waiting {@code seconds} at most (then it and its children are killed and the test fails). */
    int exit(long seconds) throws InterruptedException {
        if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly();
            throw new AssertionError("the child did not end within " + seconds + " s");
        }
        return process.exitValue();
    }

    /** The child's stderr without the JVM's own notice that the Vector API is an incubator module. */
    String stderr() throws IOException {
        return Files.readString(err).replace("WARNING: Using incubator modules: jdk.incubator.vector\n", "");
    }

    /** Waits (60 s at most) until a process of this child's reaches fault point {@code point}; returns its pid. */
    long pausedPid(String point) throws InterruptedException, IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        java.util.regex.Pattern p = java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(
                org.fsdp4j.dist.FaultPoint.PAUSED + point) + " \\(pid (\\d+)\\)");
        while (System.nanoTime() < deadline) {
            java.util.regex.Matcher m = p.matcher(Files.readString(err));
            if (m.find()) {
                return Long.parseLong(m.group(1));
            }
            if (!process.isAlive()) {
                break;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("no process paused at " + point + ": " + stderr());
    }

    /** Waits (60 s at most) for a stdout line starting with {@code prefix}. */
    void await(String prefix) throws InterruptedException, IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            String l = lines.poll(1, TimeUnit.SECONDS);
            if (l != null && l.startsWith(prefix)) {
                return;
            }
            if (l == null && !process.isAlive()) {
                break;
            }
        }
        throw new AssertionError("no line '" + prefix + "...': " + stderr());
    }
}
