// --save-dir as a new user meets it: a directory that cannot hold checkpoints is refused before
// step 1, even when only SIGTERM would save (the preemption path); a second run saving into a
// directory in use is refused (exit 5) while a dead run's directory can still be resumed; a
// resume at or past --steps is refused instead of "finishing" with the old run's figures; empty
// paths and --keep without --save-dir are refused instead of meaning the current directory or nothing.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SaveDirTest {

    /** A model whose steps take about a millisecond. */
    private static final List<String> SMALL = List.of("--device", "cpu", "--cpu-threads", "1", "--batch-size", "2",
            "--seq-len", "16", "--layers", "1", "--hidden", "32", "--heads", "2", "--context", "16");

    @TempDir
    Path dir;

    private static String[] train(int steps, String... extra) {
        List<String> a = new ArrayList<>(List.of("train", "--steps", String.valueOf(steps)));
        a.addAll(SMALL);
        a.addAll(List.of(extra));
        return a.toArray(String[]::new);
    }

    /** One "error: " line containing {@code expected}, exit {@code code}, and no step run. */
    private static void refused(ExitCode code, String expected, String... args) {
        CliRunner.Result r = CliRunner.run(args);
        String cmd = String.join(" ", args);
        assertEquals(code.code(), r.exitCode(), cmd + ": " + r.err());
        List<String> lines = r.err().lines().toList();
        assertEquals(1, lines.size(), cmd + " printed:\n" + r.err());
        assertTrue(lines.get(0).startsWith("error: ") && lines.get(0).contains(expected),
                "'" + lines.get(0) + "' does not contain '" + expected + "'");
        assertFalse(r.out().contains("step 1/"), cmd + " started training");
    }

    /** Saving only at SIGTERM must not find out at preemption that the directory is unusable. */
    @Test
    void anUnusableSaveDirIsRefusedBeforeTheFirstStep() throws IOException {
        Path file = Files.writeString(dir.resolve("a-file"), "x");
        refused(ExitCode.BAD_INPUT, "save path " + file + " exists and is not a directory", train(3, "--save-dir",
                file.toString()));
        refused(ExitCode.BAD_INPUT, "cannot create save directory " + file.resolve("sub"), train(3, "--save-dir",
                file.resolve("sub").toString()));
        if (Files.isDirectory(Path.of("/proc/self"))) {
            refused(ExitCode.BAD_INPUT, "cannot create save directory /proc/fsdp4j", train(3, "--save-dir", "/proc/fsdp4j"));
            // a directory no one can create a file in, not even root
            refused(ExitCode.BAD_INPUT, "cannot write in save directory /proc", train(3, "--save-dir", "/proc"));
        }
        Path fresh = dir.resolve("new/saves");
        CliRunner.Result ok = CliRunner.run(train(2, "--save-dir", fresh.toString()));
        assertEquals(0, ok.exitCode(), ok.err());
        assertTrue(Files.isDirectory(fresh), "a missing --save-dir is created before the run");
        try (var list = Files.list(fresh)) {
            assertEquals(List.of(".fsdp4j-save.lock"), list.map(p -> p.getFileName().toString()).toList(),
                    "no probe left behind, no checkpoint without SIGTERM or --save-every");
        }
    }

    /**
     * Two runs saving into one directory would interleave their checkpoints; the second is refused
     * before its first step, naming the holder. A killed run's directory resumes (its lock died with it).
     */
    @Test
    void aSecondRunIntoASaveDirInUseIsRefusedAndADeadRunsDirResumes() throws Exception {
        Path saves = dir.resolve("saves");
        List<String> first = new ArrayList<>(List.of(train(100_000, "--save-dir", saves.toString(), "--save-every", "20")));
        ChildJvm child = ChildJvm.start(dir.resolve("first.err"), Map.of(), first);
        try {
            child.await("checkpoint: step 20 saved");
            refused(ExitCode.OUTPUT_IN_USE, "save directory " + saves + " is in use by another run (pid "
                    + child.process().pid() + ", fsdp4j train", train(1, "--save-dir", saves.toString()));
            refused(ExitCode.OUTPUT_IN_USE, "save directory " + saves + " is in use by another run",
                    train(100_000, "--save-dir", saves.toString(), "--resume", "latest"));
        } finally {
            child.process().destroyForcibly();          // SIGKILL: its lock file stays, its OS lock does not
        }
        assertTrue(child.process().waitFor(30, java.util.concurrent.TimeUnit.SECONDS));
        Path latest;
        try (var list = Files.list(saves)) {
            latest = list.filter(p -> p.getFileName().toString().startsWith("step-")).sorted().reduce((a, b) -> b)
                    .orElseThrow();
        }
        int savedAt = Integer.parseInt(latest.getFileName().toString().substring(5));
        CliRunner.Result resumed = CliRunner.run(train(savedAt + 2, "--save-dir", saves.toString(), "--resume", "latest"));
        assertEquals(0, resumed.exitCode(), resumed.err());
        assertTrue(resumed.out().contains("resumed from " + latest + " at step " + savedAt), resumed.out());
    }

    @Test
    void resumingAtOrPastStepsIsRefused() {
        Path saves = dir.resolve("saves");
        CliRunner.Result done = CliRunner.run(train(4, "--save-dir", saves.toString(), "--save-every", "4"));
        assertEquals(0, done.exitCode(), done.err());
        Path step4 = saves.resolve("step-00000004");
        for (String steps : new String[] {"4", "3"}) {
            refused(ExitCode.BAD_INPUT, "the checkpoint " + step4 + " is at step 4 and --steps is " + steps
                    + ": nothing is left to run; raise --steps to continue", train(Integer.parseInt(steps), "--save-dir",
                    saves.toString(), "--resume", "latest"));
            refused(ExitCode.BAD_INPUT, "is at step 4 and --steps is " + steps, train(Integer.parseInt(steps), "--resume",
                    step4.toString()));
        }
        CliRunner.Result more = CliRunner.run(train(5, "--save-dir", saves.toString(), "--resume", "latest"));
        assertEquals(0, more.exitCode(), more.err());
        assertTrue(more.out().contains("resumed from " + step4 + " at step 4"), more.out());
    }

    @Test
    void emptyPathsAndKeepWithoutASaveDirAreRefused() throws IOException {
        refused(ExitCode.BAD_INPUT, "--save-dir is empty: give it a directory (--save-dir . for this one)",
                train(2, "--save-dir", ""));
        refused(ExitCode.BAD_INPUT, "--keep applies with --save-dir only", train(2, "--keep", "2"));
        Path saves = dir.resolve("saves");
        CliRunner.Result saved = CliRunner.run(train(2, "--save-dir", saves.toString(), "--save-every", "2"));
        assertEquals(0, saved.exitCode(), saved.err());
        refused(ExitCode.BAD_INPUT, "--to is empty: give the safetensors file to write", "checkpoint", "export",
                saves.toString(), "--to", "");
        refused(ExitCode.BAD_INPUT, "DIR is empty: give a checkpoint directory or a --save-dir", "checkpoint", "inspect",
                "");
        refused(ExitCode.BAD_INPUT, "DIR is empty: give a checkpoint directory or a --save-dir", "checkpoint", "export",
                "", "--to", dir.resolve("m.safetensors").toString());
    }
}
