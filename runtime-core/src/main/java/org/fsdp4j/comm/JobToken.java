// The secret every process of one job shares. It exists so that the job's rendezvous store and
// peer links admit that job's processes only: Handshake proves that both ends hold it without
// sending it. `fsdp4j launch` makes one for its processes; a process started by something else
// (srun, Kubernetes, by hand) reads it from FSDP4J_JOB_TOKEN or from the file FSDP4J_JOB_TOKEN_FILE
// names. The token never leaves this object except into a child's environment (exportTo): no
// getter, no toString, no exception message shows it.
package org.fsdp4j.comm;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;

public final class JobToken {

    /** The variable that holds the token itself (what `fsdp4j launch` gives its processes). */
    public static final String VARIABLE = "FSDP4J_JOB_TOKEN";
    /** The variable that names a file holding the token (a Slurm job's file, a mounted Kubernetes Secret). */
    public static final String FILE_VARIABLE = "FSDP4J_JOB_TOKEN_FILE";
    /** The shortest token taken: 32 characters, 128 bits as hex. */
    static final int MIN_CHARS = 32;
    /** The longest: bounds what a token file may make this process read. */
    static final int MAX_CHARS = 1024;
    /** What makes one: 32 random bytes, 64 hex characters. */
    public static final String HOW_TO_MAKE = "openssl rand -hex 32";
    /**
     * No token: the handshake still runs, keyed by a constant anyone knows, so it proves nothing;
     * it only lets a process with a token and one without tell each other apart.
     */
    public static final JobToken NONE = new JobToken(null);

    private static final byte[] NO_TOKEN_KEY = "fsdp4j: this job has no token".getBytes(StandardCharsets.UTF_8);

    private final String text;      // null for NONE

    private JobToken(String text) {
        this.text = text;
    }

    /** A new random token of 256 bits (SecureRandom), as 64 hex characters. */
    public static JobToken generate() {
        byte[] b = new byte[32];
        new SecureRandom().nextBytes(b);
        return new JobToken(HexFormat.of().formatHex(b));
    }

    /**
     * The token {@code env} gives, from FSDP4J_JOB_TOKEN or the file FSDP4J_JOB_TOKEN_FILE names
     * (blank variables count as unset), or empty. Throws IllegalArgumentException, saying what is
     * wrong but never the token, when both are set, the file cannot be read, or the token is too
     * short or holds whitespace.
     */
    public static Optional<JobToken> fromEnvironment(Map<String, String> env) {
        String value = env.get(VARIABLE);
        String file = env.get(FILE_VARIABLE);
        boolean hasValue = value != null && !value.isBlank();
        boolean hasFile = file != null && !file.isBlank();
        if (hasValue && hasFile) {
            throw new IllegalArgumentException("both " + VARIABLE + " and " + FILE_VARIABLE + " are set: give the job's"
                    + " token one way");
        }
        if (hasValue) {
            return Optional.of(of(value.strip(), VARIABLE));
        }
        if (hasFile) {
            return Optional.of(of(read(file.strip()), "the file " + file.strip() + " (" + FILE_VARIABLE + ")"));
        }
        return Optional.empty();
    }

    private static String read(String file) {
        Path path;
        try {
            path = Path.of(file);
        } catch (InvalidPathException e) {
            throw new IllegalArgumentException(FILE_VARIABLE + " '" + file + "' is not a path");
        }
        try {
            if (!Files.isRegularFile(path)) {
                throw new IllegalArgumentException(FILE_VARIABLE + " names " + file + ", which is "
                        + (Files.exists(path) ? "not a file" : "missing") + ": it must name the file that holds the job's token");
            }
            if (Files.size(path) > MAX_CHARS + 2) {
                throw new IllegalArgumentException("the job token file " + file + " (" + FILE_VARIABLE + ") holds "
                        + Files.size(path) + " bytes; a token is at most " + MAX_CHARS + " characters");
            }
            return Files.readString(path, StandardCharsets.UTF_8).strip();
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException(FILE_VARIABLE + " names " + file + ", which is missing");
        } catch (IOException | java.io.UncheckedIOException e) {
            throw new IllegalArgumentException("cannot read the job token file " + file + " (" + FILE_VARIABLE + "): "
                    + e.getClass().getSimpleName() + (e.getMessage() == null ? "" : " " + e.getMessage()));
        }
    }

    /** A token given as text; {@code source} names where it came from, for the message of a bad one. */
    static JobToken of(String text, String source) {
        if (text.length() < MIN_CHARS) {
            throw new IllegalArgumentException("the job token from " + source + " has " + text.length()
                    + " characters; it needs at least " + MIN_CHARS + " (make one with `" + HOW_TO_MAKE + "`)");
        }
        if (text.length() > MAX_CHARS) {
            throw new IllegalArgumentException("the job token from " + source + " has " + text.length()
                    + " characters; it may have at most " + MAX_CHARS);
        }
        if (!text.chars().allMatch(c -> c > 0x20 && c < 0x7f)) {
            throw new IllegalArgumentException("the job token from " + source + " holds whitespace or characters that"
                    + " are not printable ASCII (make one with `" + HOW_TO_MAKE + "`)");
        }
        return new JobToken(text);
    }

    /** Whether this is NONE: the job has no token. */
    public boolean isNone() {
        return text == null;
    }

    /** Gives a child process this token, in FSDP4J_JOB_TOKEN (never a command-line argument, which others can read). */
    public void exportTo(Map<String, String> childEnvironment) {
        childEnvironment.remove(FILE_VARIABLE);     // the child takes the variable: both set would be refused
        if (text == null) {
            childEnvironment.remove(VARIABLE);
        } else {
            childEnvironment.put(VARIABLE, text);
        }
    }

    /** The HMAC key (Handshake's): the token's bytes, or a constant for NONE. A fresh copy each time. */
    byte[] key() {
        return text == null ? NO_TOKEN_KEY.clone() : text.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public String toString() {
        return text == null ? "no job token" : "a job token (not shown)";
    }
}
