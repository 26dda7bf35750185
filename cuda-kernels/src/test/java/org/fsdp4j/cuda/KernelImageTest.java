// What CI can check about the GPU kernels without a GPU: the fatbin in the jar holds machine
// code for every architecture we list plus compute_90 PTX, every kernel the Java launchers
// name is an extern "C" kernel of src/main/cuda, and each is present in every cubin.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class KernelImageTest {

    /** One entry of a fatbin: kind 1 = PTX, 2 = ELF cubin; arch as 80, 86, 90, ... */
    record Entry(int kind, int arch, byte[] payload) {
    }

    static List<Entry> entries(byte[] fatbin) {
        ByteBuffer b = ByteBuffer.wrap(fatbin).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(0xBA55ED50, b.getInt(0), "fatbin magic");
        int headerBytes = Short.toUnsignedInt(b.getShort(6));
        long end = headerBytes + b.getLong(8);
        List<Entry> out = new ArrayList<>();
        for (int off = headerBytes; off < end; ) {
            int kind = Short.toUnsignedInt(b.getShort(off));
            int entryHeader = b.getInt(off + 4);
            int size = (int) b.getLong(off + 8);
            int arch = b.getInt(off + 28);
            byte[] payload = new byte[size];
            System.arraycopy(fatbin, off + entryHeader, payload, 0, size);
            out.add(new Entry(kind, arch, payload));
            off += entryHeader + size;
        }
        return out;
    }

    static Set<String> matches(Path dir, String glob, Pattern p) throws IOException {
        Set<String> names = new TreeSet<>();
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path f : (Iterable<Path>) files.filter(x -> x.getFileSystem().getPathMatcher("glob:" + glob)
                    .matches(x.getFileName()))::iterator) {
                Matcher m = p.matcher(Files.readString(f));
                while (m.find()) {
                    names.add(m.group(1));
                }
            }
        }
        return names;
    }

    @Test
    void everyLauncherKernelIsDefinedInTheCudaSources() throws IOException {
        Set<String> defined = matches(Path.of("src/main/cuda"), "*.cu",
                Pattern.compile("extern \"C\" __global__ void (\\w+)\\("));
        Set<String> used = matches(Path.of("src/main/java"), "*.java", Pattern.compile("kernel\\(\"(\\w+)\"\\)"));
        assertFalse(used.isEmpty(), "no launcher kernel names found");
        assertTrue(defined.containsAll(used), "launchers name kernels that do not exist: " + used + " vs " + defined);
        assertEquals(defined, used, "kernels without a launcher");
    }

    @Test
    void theFatbinHoldsEveryArchitectureAndEveryKernel() throws IOException {
        byte[] fatbin = KernelImage.bytes().orElse(null);
        assumeTrue(fatbin != null, "this build has no fatbin: nvcc was not found when cuda-kernels was built");
        Set<Integer> sass = new TreeSet<>();
        Set<Integer> ptx = new TreeSet<>();
        Set<String> kernels = matches(Path.of("src/main/cuda"), "*.cu",
                Pattern.compile("extern \"C\" __global__ void (\\w+)\\("));
        for (Entry e : entries(fatbin)) {
            if (e.kind() == 2) {
                sass.add(e.arch());
                String elf = new String(e.payload(), StandardCharsets.ISO_8859_1);
                for (String k : kernels) {
                    assertTrue(elf.contains(k + "\0"), k + " is missing from the sm_" + e.arch() + " cubin");
                }
            } else if (e.kind() == 1) {
                ptx.add(e.arch());
            }
        }
        assertEquals(Set.of(80, 86, 89, 90, 100), sass, "SASS architectures");
        assertEquals(Set.of(90), ptx, "PTX architectures");
    }
}
