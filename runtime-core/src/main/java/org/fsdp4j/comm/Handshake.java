// The first bytes of every connection between a job's processes (to the rendezvous store, between
// peers). It exists so that only a process holding the job's token gets in, and so that a process
// never talks to a listener of another job: a mutual challenge-response, the token never sent.
//
//   opening side   hello: int magic 'F4JA' | byte version | byte kind | byte flags | byte 0 | nonce[32]
//   accepting side hello, the same with its own nonce
//   opening side   proof[32] = HMAC-SHA256(token, label("opening") || 0 || nonce_open || nonce_accept)
//   accepting side byte 1 and its proof[32] = HMAC-SHA256(token, label("accepting") || ...), or byte 0
//
// The label names the kind of connection and the role, so a proof made for one can never be
// replayed as another (a store proof to a peer, the accepting side's proof back to it). Each side
// checks the other's proof with MessageDigest.isEqual. Every read is bounded by what the format
// says and by one deadline for the whole handshake, so garbage ends it at once and a stall after
// `limit`. The flags say whether a side has a token at all, so that a process without one and a
// job with one tell the user so instead of "wrong token".
package org.fsdp4j.comm;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public final class Handshake {

    static final int MAGIC = 0x46344A41;     // "F4JA"
    static final byte VERSION = 1;
    static final int NONCE_BYTES = 32;
    static final int PROOF_BYTES = 32;
    static final int HELLO_BYTES = 8 + NONCE_BYTES;
    private static final byte HAS_TOKEN = 1;
    private static final byte ACCEPTED = 1;
    private static final byte REFUSED = 0;
    private static final String ALGORITHM = "HmacSHA256";
    private static final SecureRandom RANDOM = new SecureRandom();

    /** How long a listener gives a connecting side for its whole handshake: a few seconds, then it is dropped. */
    public static final Duration ACCEPT_LIMIT = Duration.ofSeconds(5);
    /** How long a connecting side waits for the listener's answers. */
    public static final Duration OPEN_LIMIT = Duration.ofSeconds(10);

    /** What a connection is for: part of every proof, so one kind's proof is no good for another. */
    public enum Kind {
        STORE(1, "the rendezvous store"), PEER(2, "a peer listener");

        final byte code;
        final String what;

        Kind(int code, String what) {
            this.code = (byte) code;
            this.what = what;
        }
    }

    /** How a handshake failed. */
    public enum Reason {
        /** The other side sent something that is not an fsdp4j handshake (or another version or kind). */
        NOT_FSDP4J,
        /** The accepting side refused this side's proof: the tokens differ. */
        REFUSED,
        /** The other side's proof is wrong: it does not hold this job's token. */
        WRONG_PROOF,
        /** The other side hung up in the middle. */
        ENDED,
        /** The other side stalled past the limit. */
        STALLED
    }

    /**
     * A failed handshake; its message says why in words fit for a log, never a byte of the token
     * or of a proof. {@link #otherHasToken()} tells whether the other side said it has a token
     * (false when it never got that far).
     */
    public static final class Failed extends IOException {
        private static final long serialVersionUID = 1L;
        private final Reason reason;
        private final boolean otherHasToken;

        Failed(Reason reason, boolean otherHasToken, String message) {
            super(message);
            this.reason = reason;
            this.otherHasToken = otherHasToken;
        }

        public Reason reason() {
            return reason;
        }

        public boolean otherHasToken() {
            return otherHasToken;
        }

        /** Whether trying again cannot help: the other side is not this job's, or refuses this one. */
        public boolean definitive() {
            return reason == Reason.NOT_FSDP4J || reason == Reason.REFUSED || reason == Reason.WRONG_PROOF;
        }
    }

    private Handshake() {
    }

    /**
     * The connecting side's handshake on {@code s}: returns once both sides have proved the token,
     * within {@code limit}; throws Failed otherwise. Leaves the socket's read timeout at 0.
     */
    public static void open(Socket s, JobToken token, Kind kind, Duration limit) throws IOException {
        long deadline = System.nanoTime() + limit.toNanos();
        InputStream in = s.getInputStream();
        OutputStream out = s.getOutputStream();
        byte[] mine = nonce();
        out.write(hello(token, kind, mine));
        out.flush();
        Hello theirs = readHello(s, in, kind, deadline, false);
        out.write(proof(token, kind, "opening", mine, theirs.nonce));
        out.flush();
        byte[] answer = read(s, in, 1, deadline, theirs.hasToken);
        if (answer[0] != ACCEPTED) {
            throw new Failed(Reason.REFUSED, theirs.hasToken, answer[0] == REFUSED
                    ? "it refused this process's proof of the job token" : "it answered the proof with nonsense");
        }
        byte[] theirProof = read(s, in, PROOF_BYTES, deadline, theirs.hasToken);
        if (!MessageDigest.isEqual(theirProof, proof(token, kind, "accepting", mine, theirs.nonce))) {
            throw new Failed(Reason.WRONG_PROOF, theirs.hasToken, "it does not hold this job's token (its proof is wrong)");
        }
        s.setSoTimeout(0);
    }

    /**
     * The accepting side's handshake on {@code s}: returns once the connecting side has proved the
     * token (this side's proof sent), within {@code limit}; throws Failed otherwise, having told
     * the other side it is refused where it got that far. Leaves the socket's read timeout at 0.
     */
    public static void accept(Socket s, JobToken token, Kind kind, Duration limit) throws IOException {
        long deadline = System.nanoTime() + limit.toNanos();
        InputStream in = s.getInputStream();
        OutputStream out = s.getOutputStream();
        Hello theirs = readHello(s, in, kind, deadline, true);
        byte[] mine = nonce();
        out.write(hello(token, kind, mine));
        out.flush();
        byte[] theirProof = read(s, in, PROOF_BYTES, deadline, theirs.hasToken);
        if (!MessageDigest.isEqual(theirProof, proof(token, kind, "opening", theirs.nonce, mine))) {
            out.write(REFUSED);
            out.flush();
            throw new Failed(Reason.WRONG_PROOF, theirs.hasToken, theirs.hasToken == !token.isNone()
                    ? "it did not prove this job's token" : theirs.hasToken
                    ? "it has a job token and this job has none" : "it has no job token");
        }
        byte[] answer = new byte[1 + PROOF_BYTES];
        answer[0] = ACCEPTED;
        System.arraycopy(proof(token, kind, "accepting", theirs.nonce, mine), 0, answer, 1, PROOF_BYTES);
        out.write(answer);
        out.flush();
        s.setSoTimeout(0);
    }

    /** One side's hello: whether it has a token, and its nonce. */
    private record Hello(boolean hasToken, byte[] nonce) {
    }

    private static byte[] nonce() {
        byte[] n = new byte[NONCE_BYTES];
        RANDOM.nextBytes(n);
        return n;
    }

    private static byte[] hello(JobToken token, Kind kind, byte[] nonce) {
        return ByteBuffer.allocate(HELLO_BYTES).putInt(MAGIC).put(VERSION).put(kind.code)
                .put(token.isNone() ? 0 : HAS_TOKEN).put((byte) 0).put(nonce).array();
    }

    private static Hello readHello(Socket s, InputStream in, Kind kind, long deadline, boolean accepting)
            throws IOException {
        byte[] magic = read(s, in, 4, deadline, false);      // garbage ends it here, before anything else is read
        if (ByteBuffer.wrap(magic).getInt() != MAGIC) {
            throw new Failed(Reason.NOT_FSDP4J, false, String.format("it sent something that is not an fsdp4j"
                    + " handshake (first bytes 0x%08x)", ByteBuffer.wrap(magic).getInt()));
        }
        ByteBuffer rest = ByteBuffer.wrap(read(s, in, HELLO_BYTES - 4, deadline, false));
        byte version = rest.get();
        byte kindCode = rest.get();
        boolean hasToken = (rest.get() & HAS_TOKEN) != 0;
        rest.get();
        if (version != VERSION) {
            throw new Failed(Reason.NOT_FSDP4J, hasToken, "it speaks handshake version " + version + ", this process "
                    + VERSION + " (another fsdp4j version)");
        }
        if (kindCode != kind.code) {
            throw new Failed(Reason.NOT_FSDP4J, hasToken, accepting
                    ? "it opened a connection of another kind (" + kindCode + ") on " + kind.what
                    : "it is not " + kind.what + " (another kind of fsdp4j listener)");
        }
        byte[] nonce = new byte[NONCE_BYTES];
        rest.get(nonce);
        return new Hello(hasToken, nonce);
    }

    /** Exactly {@code n} bytes, by the deadline: ENDED at the end of stream, STALLED past the deadline. */
    private static byte[] read(Socket s, InputStream in, int n, long deadline, boolean otherHasToken) throws IOException {
        byte[] b = new byte[n];
        int got = 0;
        while (got < n) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            if (left <= 0) {
                throw new Failed(Reason.STALLED, otherHasToken, "it stalled in the middle of the handshake");
            }
            s.setSoTimeout((int) Math.min(Integer.MAX_VALUE, left));
            int r;
            try {
                r = in.read(b, got, n - got);
            } catch (SocketTimeoutException e) {
                throw new Failed(Reason.STALLED, otherHasToken, "it stalled in the middle of the handshake");
            } catch (EOFException e) {
                r = -1;
            }
            if (r < 0) {
                throw new Failed(Reason.ENDED, otherHasToken, "it hung up in the middle of the handshake");
            }
            got += r;
        }
        return b;
    }

    /** HMAC-SHA256 under the token of the label (kind and role) and both nonces, the opening side's first. */
    static byte[] proof(JobToken token, Kind kind, String role, byte[] openingNonce, byte[] acceptingNonce) {
        byte[] key = token.key();
        try {
            Mac mac = Mac.getInstance(ALGORITHM);
            mac.init(new SecretKeySpec(key, ALGORITHM));
            mac.update(("fsdp4j job handshake v" + VERSION + "/" + kind.name().toLowerCase(java.util.Locale.ROOT) + "/"
                    + role).getBytes(StandardCharsets.UTF_8));
            mac.update((byte) 0);
            mac.update(openingNonce);
            mac.update(acceptingNonce);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            // every Java runtime has HmacSHA256 (a required algorithm): only a broken one gets here
            throw new IllegalStateException("HmacSHA256 is not available in this Java runtime", e);
        } finally {
            java.util.Arrays.fill(key, (byte) 0);
        }
    }
}
