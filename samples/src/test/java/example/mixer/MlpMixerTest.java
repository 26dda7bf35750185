// The user's example: it trains (the loss falls), N = 2 reaches the losses of N = 1 to fp32
// rounding, and it is written against the public API only: no file under example/ names any
// fsdp4j package but org.fsdp4j.api.
package example.mixer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class MlpMixerTest {

    @Test
    void twoRanksTrainAsOne() {
        int steps = 12;
        float[] one = MlpMixer.train(1, steps);
        float[] two = MlpMixer.train(2, steps);
        for (int s = 0; s < steps; s++) {
            // fp32: the two ranks' gradient halves are summed then averaged, one rank sums all
            // rows at once; a few ulps per step, compounded over the steps
            assertEquals(one[s], two[s], 1e-5 * Math.abs(one[s]), "step " + (s + 1) + ": " + Arrays.toString(one)
                    + " vs " + Arrays.toString(two));
        }
        assertTrue(one[steps - 1] < one[0] - 0.3, "the mixer learns: " + Arrays.toString(one));
    }

    @Test
    void theExampleUsesThePublicApiOnly() throws IOException {
        Pattern fsdp4j = Pattern.compile("org\\.fsdp4j\\.(\\w+)");
        List<Path> files;
        try (Stream<Path> walk = Files.walk(Path.of("src/main/java/example"))) {
            files = walk.filter(p -> p.toString().endsWith(".java")).toList();
        }
        assertTrue(!files.isEmpty(), "no example sources found from " + Path.of("").toAbsolutePath());
        for (Path f : files) {
            Matcher m = fsdp4j.matcher(Files.readString(f));
            while (m.find()) {
                assertEquals("api", m.group(1), f + " uses " + m.group() + ", an internal package");
            }
        }
    }
}
