// Shared pieces of the wire-format fuzz tests (issue 47): a seeded source of random and mutated
// inputs, and a loop bounded both in count and in time, so each test is reproducible from the
// seed it prints and none can take CI's time. Mutations are of two kinds: of bytes (bit flips,
// truncation, insertion, splices of random bytes, 32/64-bit fields set to extremes) and, for
// JSON formats, of the tree (keys removed, duplicated, renamed; values replaced by wrong types,
// huge or negative numbers, nulls, deep nesting).
package org.fsdp4j.testing;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Random;

public final class Fuzz {

    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    private static final long[] EXTREMES = {0, -1, 1, Integer.MAX_VALUE, Integer.MIN_VALUE, Integer.MAX_VALUE + 1L,
        Long.MAX_VALUE, Long.MIN_VALUE, 1L << 31, 1L << 32, 1L << 40, 1L << 62, -2, 0x7fff_fff0, 2L << 30};

    /** One input: how it was made (for the failure message) and its bytes. */
    public record Input(int number, String how, byte[] bytes) {
        public String describe(long seed) {
            String hex = HexFormat.of().formatHex(bytes, 0, Math.min(bytes.length, 96));
            return "seed " + seed + ", input #" + number + " (" + how + ", " + bytes.length + " bytes: " + hex
                    + (bytes.length > 96 ? "..." : "") + ")";
        }
    }

    /** What a test checks for one input; it may throw anything, the loop judges. */
    public interface Check {
        void accept(Input in) throws Exception;
    }

    private final long seed;
    private final Random random;

    public Fuzz(long seed) {
        this.seed = seed;
        this.random = new Random(seed);
    }

    public long seed() {
        return seed;
    }

    public Random random() {
        return random;
    }

    /**
     * Runs {@code check} on up to {@code count} inputs from {@code source} (number → input), for at
     * most {@code budgetMillis} (at least {@code minimum} inputs regardless); a throwable of
     * {@code clean} is the parser's one documented refusal, anything else fails the test naming
     * the seed and the input. Returns how many inputs ran.
     */
    public int run(int count, int minimum, long budgetMillis, java.util.function.IntFunction<Input> source,
                   Class<? extends Throwable> clean, Check check) {
        long deadline = System.nanoTime() + budgetMillis * 1_000_000;
        int n = 0;
        for (; n < count && (n < minimum || System.nanoTime() < deadline); n++) {
            Input in = source.apply(n);
            try {
                check.accept(in);
            } catch (Throwable t) {
                if (clean.isInstance(t)) {
                    continue;
                }
                AssertionError e = new AssertionError("not a clean refusal (" + clean.getSimpleName() + ") but "
                        + t + " for " + in.describe(seed), t);
                throw e;
            }
        }
        System.out.printf("fuzz: %d inputs in %d ms (seed %d)%n", n,
                (System.nanoTime() - deadline) / 1_000_000 + budgetMillis, seed);
        return n;
    }

    // ------------------------------------------------------------------ bytes

    public byte[] randomBytes(int maxLength) {
        byte[] b = new byte[random.nextInt(maxLength + 1)];
        random.nextBytes(b);
        return b;
    }

    /** A random extreme for a length field: huge, negative, just past a bound. */
    public long extreme() {
        return random.nextInt(4) == 0 ? random.nextLong() : EXTREMES[random.nextInt(EXTREMES.length)];
    }

    /** {@code valid} changed in one to three ways; {@code fields} are offsets of 4-byte (big-endian) length fields. */
    public Input mutate(int number, byte[] valid, int[] intFields, ByteOrder order) {
        byte[] b = valid.clone();
        List<String> how = new ArrayList<>();
        int changes = 1 + random.nextInt(3);
        for (int c = 0; c < changes; c++) {
            int kind = random.nextInt(7);
            if (b.length == 0) {
                kind = 4;
            }
            switch (kind) {
                case 0 -> {
                    int at = random.nextInt(b.length);
                    b[at] ^= (byte) (1 << random.nextInt(8));
                    how.add("bit flip at " + at);
                }
                case 1 -> {
                    int len = random.nextInt(b.length);
                    b = Arrays.copyOf(b, len);
                    how.add("truncated to " + len);
                }
                case 2 -> {
                    if (intFields.length == 0 || intFields[intFields.length - 1] + 4 > b.length) {
                        b[random.nextInt(b.length)] = (byte) random.nextInt();
                        how.add("byte set");
                    } else {
                        int at = intFields[random.nextInt(intFields.length)];
                        long v = extreme();
                        ByteBuffer.wrap(b).order(order).putInt(at, (int) v);
                        how.add("int at " + at + " set to " + (int) v);
                    }
                }
                case 3 -> {
                    int at = random.nextInt(b.length);
                    int len = Math.min(b.length - at, 1 + random.nextInt(16));
                    byte[] r = new byte[len];
                    random.nextBytes(r);
                    System.arraycopy(r, 0, b, at, len);
                    how.add(len + " random bytes at " + at);
                }
                case 4 -> {
                    byte[] r = randomBytes(32);
                    int at = random.nextInt(b.length + 1);
                    byte[] nb = new byte[b.length + r.length];
                    System.arraycopy(b, 0, nb, 0, at);
                    System.arraycopy(r, 0, nb, at, r.length);
                    System.arraycopy(b, at, nb, at + r.length, b.length - at);
                    b = nb;
                    how.add(r.length + " bytes inserted at " + at);
                }
                case 5 -> {
                    if (b.length >= 8) {
                        int at = random.nextInt(b.length - 7);
                        ByteBuffer.wrap(b).order(order).putLong(at, extreme());
                        how.add("long at " + at + " set");
                    }
                }
                default -> {
                    int from = random.nextInt(b.length);
                    int len = random.nextInt(b.length - from + 1);
                    byte[] nb = new byte[b.length + len];
                    System.arraycopy(b, 0, nb, 0, b.length);
                    System.arraycopy(b, from, nb, b.length, len);
                    b = nb;
                    how.add(len + " bytes repeated");
                }
            }
        }
        return new Input(number, String.join(", ", how), b);
    }

    // ------------------------------------------------------------------ JSON

    /** {@code valid} (JSON text) mutated: as a tree two times in three, else as bytes. */
    public Input mutateJson(int number, String valid) {
        if (random.nextInt(3) == 2) {
            return mutate(number, valid.getBytes(StandardCharsets.UTF_8), new int[0], ByteOrder.BIG_ENDIAN);
        }
        JsonNode root;
        try {
            root = MAPPER.readTree(valid);
        } catch (Exception e) {
            throw new IllegalArgumentException(e);
        }
        List<String> how = new ArrayList<>();
        int changes = 1 + random.nextInt(3);
        for (int c = 0; c < changes; c++) {
            how.add(mutateTree(root));
        }
        String text = root.toString();
        if (random.nextInt(16) == 0 && root.isObject()) {
            // nesting past what any parser should recurse into
            int depth = 1000 + random.nextInt(20_000);
            text = "{\"deep\":" + "[".repeat(depth) + "]".repeat(depth) + "," + text.substring(1);
            how.add("nesting " + depth + " deep");
        }
        if (random.nextInt(8) == 0 && root.isObject() && root.size() > 0) {
            // a duplicated key, which a tree cannot hold: repeat the first member textually
            String first = root.fieldNames().next();
            text = "{\"" + first + "\":" + wrongValue() + "," + text.substring(1);
            how.add("duplicated key " + first);
        }
        return new Input(number, String.join(", ", how), text.getBytes(StandardCharsets.UTF_8));
    }

    private String mutateTree(JsonNode root) {
        List<JsonNode> containers = new ArrayList<>();
        collect(root, containers);
        JsonNode c = containers.get(random.nextInt(containers.size()));
        if (c instanceof ObjectNode o) {
            List<String> names = new ArrayList<>();
            o.fieldNames().forEachRemaining(names::add);
            if (names.isEmpty()) {
                o.set("x", wrongValue());
                return "key added";
            }
            String k = names.get(random.nextInt(names.size()));
            switch (random.nextInt(5)) {
                case 0 -> {
                    o.remove(k);
                    return "removed " + k;
                }
                case 1 -> {
                    o.set(k + "_", o.get(k));
                    o.remove(k);
                    return "renamed " + k;
                }
                case 2 -> {
                    o.set(k, number());
                    return k + " = " + o.get(k);
                }
                default -> {
                    o.set(k, wrongValue());
                    return k + " = " + o.get(k);
                }
            }
        }
        ArrayNode a = (ArrayNode) c;
        switch (random.nextInt(4)) {
            case 0 -> {
                if (!a.isEmpty()) {
                    a.remove(random.nextInt(a.size()));
                }
                return "array element removed";
            }
            case 1 -> {
                a.add(a.isEmpty() ? wrongValue() : a.get(random.nextInt(a.size())).deepCopy());
                return "array element repeated";
            }
            case 2 -> {
                if (!a.isEmpty()) {
                    a.set(random.nextInt(a.size()), number());
                }
                return "array element = number";
            }
            default -> {
                if (!a.isEmpty()) {
                    a.set(random.nextInt(a.size()), wrongValue());
                }
                return "array element = wrong type";
            }
        }
    }

    private static void collect(JsonNode n, List<JsonNode> out) {
        if (n.isContainerNode()) {
            out.add(n);
            for (Iterator<JsonNode> it = n.elements(); it.hasNext(); ) {
                collect(it.next(), out);
            }
        }
    }

    /** A number a field might be set to: extremes, fractions, past long. */
    private JsonNode number() {
        return switch (random.nextInt(6)) {
            case 0 -> F.numberNode(extreme());
            case 1 -> F.numberNode((int) extreme());
            case 2 -> F.numberNode(random.nextDouble() * 1e6 - 5e5);
            case 3 -> F.numberNode(new BigInteger(100, random));
            case 4 -> F.numberNode(random.nextBoolean() ? Double.MAX_VALUE : -1e300);
            default -> F.numberNode(random.nextInt(64));
        };
    }

    private JsonNode wrongValue() {
        return switch (random.nextInt(8)) {
            case 0 -> F.nullNode();
            case 1 -> F.textNode("x" + random.nextInt(100));
            case 2 -> F.booleanNode(random.nextBoolean());
            case 3 -> F.arrayNode().add(random.nextInt(10));
            case 4 -> F.objectNode().put("a", 1);
            case 5 -> F.textNode(String.valueOf(random.nextInt(100)));
            case 6 -> {
                JsonNode deep = F.numberNode(1);
                for (int i = 0; i < 100 + random.nextInt(800); i++) {
                    deep = F.arrayNode().add(deep);
                }
                yield deep;
            }
            default -> number();
        };
    }
}
