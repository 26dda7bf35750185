// Where a process takes the job's token from, and that it never shows it: FSDP4J_JOB_TOKEN, or the
// file FSDP4J_JOB_TOKEN_FILE names (its trailing newline dropped), not both; a token too short,
// with whitespace, or a file missing or too big is refused in a message without the token; a
// generated one is 64 hex characters of fresh randomness; a child gets it in its environment only
// as FSDP4J_JOB_TOKEN; and a refused address is logged once.
package org.fsdp4j.comm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class JobTokenTest {

    private static final String SECRET = "5f0c2d6a9b8e7f1a3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70819";

    @TempDir
    Path dir;

    /** The text a child would get: what exportTo puts in an environment. */
    private static String text(JobToken t) {
        Map<String, String> env = new HashMap<>();
        t.exportTo(env);
        return env.get(JobToken.VARIABLE);
    }

    @Test
    void fromTheVariableOrTheFileNotBoth() throws Exception {
        assertTrue(JobToken.fromEnvironment(Map.of()).isEmpty());
        assertTrue(JobToken.fromEnvironment(Map.of(JobToken.VARIABLE, "  ")).isEmpty(), "blank is unset");
        assertEquals(SECRET, text(JobToken.fromEnvironment(Map.of(JobToken.VARIABLE, SECRET)).orElseThrow()));

        Path file = dir.resolve("token");
        Files.writeString(file, SECRET + "\n");
        assertEquals(SECRET, text(JobToken.fromEnvironment(Map.of(JobToken.FILE_VARIABLE, file.toString())).orElseThrow()));

        IllegalArgumentException both = assertThrows(IllegalArgumentException.class, () -> JobToken.fromEnvironment(
                Map.of(JobToken.VARIABLE, SECRET, JobToken.FILE_VARIABLE, file.toString())));
        assertTrue(both.getMessage().contains("both FSDP4J_JOB_TOKEN and FSDP4J_JOB_TOKEN_FILE"), both.getMessage());
        assertFalse(both.getMessage().contains(SECRET));
    }

    @Test
    void anUnusableTokenIsRefusedWithoutShowingIt() throws Exception {
        String shortOne = "tooshortsecret";
        Path big = dir.resolve("big");
        Files.writeString(big, "x".repeat(5000));
        Path spaced = dir.resolve("spaced");
        Files.writeString(spaced, SECRET.substring(0, 20) + " " + SECRET.substring(20));
        List<Map<String, String>> cases = List.of(Map.of(JobToken.VARIABLE, shortOne),
                Map.of(JobToken.FILE_VARIABLE, dir.resolve("missing").toString()),
                Map.of(JobToken.FILE_VARIABLE, dir.toString()),
                Map.of(JobToken.FILE_VARIABLE, big.toString()),
                Map.of(JobToken.FILE_VARIABLE, spaced.toString()));
        String[] expected = {"has 14 characters; it needs at least 32", "which is missing", "which is not a file",
                "holds 5000 bytes", "holds whitespace"};
        for (int i = 0; i < cases.size(); i++) {
            Map<String, String> env = cases.get(i);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JobToken.fromEnvironment(env));
            assertTrue(e.getMessage().contains(expected[i]), e.getMessage());
            assertFalse(e.getMessage().contains(shortOne) || e.getMessage().contains(SECRET.substring(0, 20))
                    || e.getMessage().contains("xxxxxxxx"), "the token leaked into: " + e.getMessage());
            assertEquals(1, e.getMessage().lines().count());
        }
    }

    @Test
    void aGeneratedTokenIs256FreshBitsAndNeverShown() {
        JobToken a = JobToken.generate();
        JobToken b = JobToken.generate();
        assertTrue(text(a).matches("[0-9a-f]{64}"), "64 hex characters");
        assertNotEquals(text(a), text(b));
        assertFalse(a.toString().contains(text(a)));
        assertFalse(a.isNone());
        assertTrue(JobToken.NONE.isNone());
    }

    @Test
    void aChildGetsTheVariableAndNotTheFile() {
        Map<String, String> env = new HashMap<>(Map.of(JobToken.FILE_VARIABLE, "/some/file", "OTHER", "1"));
        JobToken t = JobToken.fromEnvironment(Map.of(JobToken.VARIABLE, SECRET)).orElseThrow();
        t.exportTo(env);
        assertEquals(Map.of(JobToken.VARIABLE, SECRET, "OTHER", "1"), env);
        JobToken.NONE.exportTo(env);
        assertEquals(Map.of("OTHER", "1"), env);
    }

    @Test
    void aRefusalIsLoggedOncePerRemoteAddress() {
        List<String> lines = new ArrayList<>();
        RefusalLog log = new RefusalLog(lines::add);
        log.refused("the rendezvous store", new InetSocketAddress("127.0.0.1", 40001), "it did not prove this job's token");
        log.refused("a peer listener", new InetSocketAddress("127.0.0.1", 40002), "it stalled in the middle of the handshake");
        log.refused("the rendezvous store", new InetSocketAddress("127.0.0.2", 40003), "it hung up");
        assertEquals(List.of("fsdp4j: refused a connection to the rendezvous store from 127.0.0.1:40001: it did not prove"
                        + " this job's token (further ones from 127.0.0.1 are not logged)",
                "fsdp4j: refused a connection to the rendezvous store from 127.0.0.2:40003: it hung up (further ones from"
                        + " 127.0.0.2 are not logged)"), lines);
        assertEquals(3, log.count());
        for (int i = 0; i < 2 * RefusalLog.MAX_ADDRESSES; i++) {
            log.refused("the rendezvous store", new InetSocketAddress("10.1." + (i / 250) + "." + (i % 250), 1), "why");
        }
        assertEquals(RefusalLog.MAX_ADDRESSES + 1, lines.size(), "bounded, with one line saying so");
        assertTrue(lines.get(lines.size() - 1).contains("further ones are not logged"), lines.get(lines.size() - 1));
    }
}
