// A disk that fills during a run must not leave a torn last line in metrics.jsonl: programs that
// follow the file (tail -f, a dashboard) and the person who reads it after the crash parse every
// line. The full disk is the kernel's: the run is a child JVM under a file-size limit (ulimit -f,
// 2 KiB), so its write of the metrics line that crosses it stops part-way and then fails (EFBIG,
// as ENOSPC does on a full disk). The run ends with exit 6 and one line naming the file.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MetricsLogFullDiskTest {

    @TempDir
    Path dir;

    @Test
    void aWriteThatFailsMidLineLeavesOnlyWholeLines() throws Exception {
        Path out = dir.resolve("out");
        // ulimit -f counts 512-byte blocks: a limit of 2 KiB falls inside the fifth line or so
        ChildJvm run = ChildJvm.start(dir.resolve("err"), Map.of(), List.of("sh", "-c", "ulimit -f 4; exec \"$@\"", "sh"),
                List.of(), List.of("train", "--device", "cpu", "--preset", "tiny", "--batch-size", "8", "--seq-len", "32",
                        "--steps", "40", "--out", out.toString()));
        int code = run.exit(120);
        String err = run.stderr();
        assertEquals(ExitCode.IO_ERROR.code(), code, err);
        List<String> errors = err.lines().filter(l -> l.startsWith("error: ")).toList();
        assertEquals(1, errors.size(), err);
        assertTrue(errors.get(0).startsWith("error: cannot write " + out.resolve(MetricsLog.FILE) + ": File too large"), err);

        byte[] bytes = Files.readAllBytes(out.resolve(MetricsLog.FILE));
        assertTrue(bytes.length > 0 && bytes.length <= 2048, "the limit was reached: " + bytes.length + " bytes");
        assertEquals('\n', bytes[bytes.length - 1], "the file ends with a whole line");
        List<String> lines = Files.readAllLines(out.resolve(MetricsLog.FILE));
        ObjectMapper json = new ObjectMapper();
        for (int i = 0; i < lines.size(); i++) {
            assertEquals(i + 1, json.readTree(lines.get(i)).get("step").asInt(), "line " + (i + 1) + ": " + lines.get(i));
        }
        assertTrue(lines.size() < 40, "the run stopped at the full disk: " + lines.size() + " lines");
    }
}
