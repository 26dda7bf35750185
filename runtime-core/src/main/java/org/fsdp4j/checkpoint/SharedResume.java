// Which checkpoint a run over several processes resumes from: they must all load the same one,
// and "--resume latest" looked up by each on its own could differ (a save committed between two
// lookups, a --save-dir that is not shared). Process 0 resolves it (naming any partial save it
// skips, as one process does) and publishes its place relative to the directory the flags name
// (so nodes that mount the shared filesystem elsewhere still agree) with its index's checksum;
// every other process checks that it sees that very checkpoint, else fails naming the directory
// that must be shared. Each then loads its own ranks' shards through CheckpointReader.
package org.fsdp4j.checkpoint;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.function.Consumer;
import org.fsdp4j.comm.CommException;
import org.fsdp4j.dist.ProcessGroup;

public final class SharedResume {

    private static final String KEY = "resume/checkpoint";
    /** Process 0's answer when it cannot resolve the checkpoint, followed by why. */
    private static final String FAILED = "failed: ";

    private SharedResume() {
    }

    /**
     * The checkpoint {@code resume} ("latest" or a directory) names for this run, the same in
     * every process of {@code processes}; waits up to {@code timeout} for process 0's answer.
     */
    public static Path resolve(String resume, Optional<Path> saveDir, Consumer<String> log, ProcessGroup processes,
                               Duration timeout) {
        boolean latest = resume.equals("latest");
        Path where = latest ? saveDir.orElseThrow(() -> new IllegalArgumentException(
                "--resume latest needs --save-dir DIR (where to look for the latest checkpoint)")) : Path.of(resume);
        String flag = latest ? "--save-dir" : "--resume";
        if (processes.process() == 0) {
            String answer;
            Path dir;
            try {
                dir = Checkpointer.resolve(resume, saveDir, log);
                answer = (dir.equals(where) ? "" : where.relativize(dir).toString()) + "\t" + indexCrc(dir);
            } catch (RuntimeException e) {       // the others stop at once, before this process ends with the store
                processes.publish(KEY, (FAILED + e.getMessage()).getBytes(StandardCharsets.UTF_8));
                throw e;
            }
            processes.publish(KEY, answer.getBytes(StandardCharsets.UTF_8));
            return dir;
        }
        String answer = new String(processes.await(KEY, "the checkpoint to resume from, which "
                + processes.describe(0) + " looks up", timeout), StandardCharsets.UTF_8);
        if (answer.startsWith(FAILED)) {
            throw new CommException(processes.describe(0) + " failed: " + answer.substring(FAILED.length()));
        }
        String[] published = answer.split("\t", -1);
        Path dir = published[0].isEmpty() ? where : where.resolve(published[0]);
        String mine = Files.isDirectory(dir) ? indexCrc(dir) : null;
        if (!published[1].equals(mine)) {
            throw new SaveDirNotSharedException(flag, where, processes.describe(processes.process())
                    + (mine == null ? " cannot see " : " sees another checkpoint in ") + dir + ", which "
                    + processes.describe(0) + " resumes from");
        }
        return dir;
    }

    /** CRC-32C of the checkpoint's index.json ("none" without one: the reader refuses it later, naming it). */
    private static String indexCrc(Path dir) {
        Path index = dir.resolve(CheckpointIndex.FILE_NAME);
        try {
            return Files.isRegularFile(index) ? CheckpointWriter.crc32cOf(index) : "none";
        } catch (IOException e) {
            throw new CheckpointException(index, "cannot read: " + e.getMessage(), e);
        }
    }
}
