// The CPU backend's kernel choices that follow the machine, and the -D properties that override
// them (for comparing the choices on one build): the register tile's shape (AVX2's 16 registers
// cannot hold the 6 × 4 tile's 24 accumulators) and whether Linear-sized fp32 GEMMs run on PanelGemm or
// on OpenBLAS (whichever the core runs faster: javaGemm). Pure functions of
// their inputs, so the tests can ask for other machines; no state of its own, so CpuBackend can
// check the properties when it is made: a bad value is then a one-line error before the first step,
// not a failed initialisation of TileGemm or PanelGemm in the middle of one.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

final class CpuKernelChoice {

    static final String TILE_PROPERTY = Fsdp4jSystemProperties.TILE;
    static final String GEMM_PROPERTY = Fsdp4jSystemProperties.CPU_GEMM;

    private CpuKernelChoice() {
    }

    /** Whether this machine's tile is 4 × 3 vectors (TileGemm.NARROW). */
    static boolean narrowTile() {
        return narrowTile(arch(), Simd.FL, Fsdp4jSystemProperties.tile());
    }

    /** Whether this machine's Linear-sized fp32 GEMMs run on PanelGemm (PanelGemm.ENABLED). */
    static boolean javaGemm() {
        String[] cpu = vendorAndFamily();
        return javaGemm(Fsdp4jSystemProperties.cpuGemm(), narrowTile(arch(), Simd.FL, ""),
                wideBlas(arch(), Simd.FL, System.getenv("OPENBLAS_CORETYPE"), cpu[0], cpu[1]));
    }

    /** Throws IllegalArgumentException, naming the property and its values, if either property is bad. */
    static void check() {
        narrowTile();
        javaGemm();
    }

    /**
     * Whether the tile is 4 × 3 vectors: on x86 below AVX-512 (16 vector registers), unless
     * {@code -Dfsdp4j.tile=6x4|4x3} picks one; the bits do not depend on it. AVX-512 and AArch64
     * (32 registers) take 6 × 4.
     */
    static boolean narrowTile(String arch, int floatLanes, String override) {
        if (!override.isEmpty()) {
            if (!override.equals("6x4") && !override.equals("4x3")) {
                throw new IllegalArgumentException("-Dfsdp4j.tile must be 6x4 or 4x3, got '" + override + "'");
            }
            return override.equals("4x3");
        }
        return x86(arch) && floatLanes < 16;
    }

    /**
     * By default PanelGemm where the register tile has 32 vector registers (AVX-512, AArch64) and
     * OpenBLAS has no faster kernel; OpenBLAS on x86 below AVX-512 ({@code narrowIsa}), where the
     * 4 × 3 tile over 16 registers runs whole GEMMs at ~0.8 of OpenBLAS's assembly and whole
     * training steps went 21–35% faster on OpenBLAS, and where OpenBLAS runs
     * its AVX-512 kernels on a core with two 512-bit FMA pipes ({@code wideBlas}): one thread
     * 149–184 GFLOP/s against PanelGemm's 98–129, steps 12–15% faster. {@code choice} is
     * "java", "openblas" or empty (the default).
     */
    static boolean javaGemm(String choice, boolean narrowIsa, boolean wideBlas) {
        switch (choice.toLowerCase(Locale.ROOT)) {
            case "":
                return !narrowIsa && !wideBlas;
            case "java":
                return true;
            case "openblas":
                return false;
            default:
                throw new IllegalArgumentException("-Dfsdp4j.cpuGemm must be java or openblas, got '" + choice + "'");
        }
    }

    /**
     * Whether OpenBLAS runs AVX-512 kernels on a core that issues two 512-bit FMAs a cycle: x86
     * with 16 fp32 lanes, {@code coreType} (OPENBLAS_CORETYPE, null when unset: OpenBLAS then
     * detects an AVX-512 core itself) unset or naming an AVX-512 core, and not AMD family 25
     * (Zen 4 runs a 512-bit FMA as two halves, and there PanelGemm ran Linear sizes at 99–108 GFLOP/s
     * a core against OpenBLAS's 87–96). Intel's
     * server cores and Zen 5 (family 26) have the two pipes.
     */
    static boolean wideBlas(String arch, int floatLanes, String coreType, String vendor, String family) {
        if (!x86(arch) || floatLanes < 16) {
            return false;
        }
        if (coreType != null && !coreType.isEmpty()
                && !WIDE_CORES.contains(coreType.toLowerCase(Locale.ROOT))) {
            return false;                        // told to use older kernels (Haswell, Zen, ...)
        }
        return !("AuthenticAMD".equals(vendor) && "25".equals(family));
    }

    /** OpenBLAS's core names whose kernels use 512-bit FMAs. */
    private static final List<String> WIDE_CORES = List.of("skylakex", "cooperlake", "sapphirerapids");

    /** /proc/cpuinfo's vendor_id and cpu family, or empty strings where it cannot be read. */
    private static String[] vendorAndFamily() {
        String vendor = "";
        String family = "";
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
                int colon = line.indexOf(':');
                if (colon < 0) {
                    continue;
                }
                String key = line.substring(0, colon).trim();
                if (key.equals("vendor_id") && vendor.isEmpty()) {
                    vendor = line.substring(colon + 1).trim();
                } else if (key.equals("cpu family") && family.isEmpty()) {
                    family = line.substring(colon + 1).trim();
                }
                if (!vendor.isEmpty() && !family.isEmpty()) {
                    break;
                }
            }
        } catch (IOException | SecurityException e) {
            // not Linux: no vendor known, so only the ISA and OPENBLAS_CORETYPE decide
        }
        return new String[] {vendor, family};
    }

    /**
     * The GEMM kernels in words, for the backend's name in logs and bench JSON: "PanelGemm 6x4 +
     * OpenBLAS" where Linear-sized fp32 products run on PanelGemm (OpenBLAS keeps the small ones
     * and the half-precision ones), "OpenBLAS" where it runs them all; {@code core} is
     * OPENBLAS_CORETYPE's value, or null when it is not set.
     */
    static String gemmWords(boolean javaGemm, boolean narrowTile, String core) {
        String blas = "OpenBLAS" + (core == null || core.isEmpty() ? "" : " " + core);
        return javaGemm ? "PanelGemm " + (narrowTile ? "4x3" : "6x4") + " + " + blas : blas;
    }

    /** gemmWords for the kernels this JVM runs (PanelGemm.ENABLED, TileGemm.NARROW) and its environment. */
    static String gemmWords() {
        return gemmWords(PanelGemm.ENABLED, TileGemm.NARROW, System.getenv("OPENBLAS_CORETYPE"));
    }

    private static boolean x86(String arch) {
        return arch.equals("amd64") || arch.equals("x86_64") || arch.equals("x86") || arch.equals("i386");
    }

    private static String arch() {
        return System.getProperty("os.arch", "");
    }
}
