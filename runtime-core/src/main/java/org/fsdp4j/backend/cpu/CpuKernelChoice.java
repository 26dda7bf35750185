// The CPU backend's kernel choices that follow the machine, and the -D properties that override
// them (for comparing the choices on one build): the register tile's shape (bench/NOTES.md 2.18)
// and whether Linear-sized fp32 GEMMs run on PanelGemm or on OpenBLAS (2.19). Pure functions of
// their inputs, so the tests can ask for other machines; no state of its own, so CpuBackend can
// check the properties when it is made: a bad value is then a one-line error before the first step,
// not a failed initialisation of TileGemm or PanelGemm in the middle of one.
package org.fsdp4j.backend.cpu;

import java.util.Locale;

final class CpuKernelChoice {

    static final String TILE_PROPERTY = "fsdp4j.tile";
    static final String GEMM_PROPERTY = "fsdp4j.cpuGemm";

    private CpuKernelChoice() {
    }

    /** Whether this machine's tile is 4 × 3 vectors (TileGemm.NARROW). */
    static boolean narrowTile() {
        return narrowTile(arch(), Simd.FL, System.getProperty(TILE_PROPERTY, ""));
    }

    /** Whether this machine's Linear-sized fp32 GEMMs run on PanelGemm (PanelGemm.ENABLED). */
    static boolean javaGemm() {
        return javaGemm(System.getProperty(GEMM_PROPERTY, ""), narrowTile(arch(), Simd.FL, ""));
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
        boolean x86 = arch.equals("amd64") || arch.equals("x86_64") || arch.equals("x86") || arch.equals("i386");
        return x86 && floatLanes < 16;
    }

    /**
     * By default PanelGemm where the register tile has 32 vector registers (AVX-512, AArch64),
     * OpenBLAS on x86 below AVX-512 ({@code narrowIsa}): there the 4 × 3 tile over 16 registers
     * runs whole GEMMs at ~0.8 of OpenBLAS's assembly, and whole training steps went 21–35% faster
     * on OpenBLAS (bench/NOTES.md 2.19). {@code choice} is "java", "openblas" or empty (the default).
     */
    static boolean javaGemm(String choice, boolean narrowIsa) {
        switch (choice.toLowerCase(Locale.ROOT)) {
            case "":
                return !narrowIsa;
            case "java":
                return true;
            case "openblas":
                return false;
            default:
                throw new IllegalArgumentException("-Dfsdp4j.cpuGemm must be java or openblas, got '" + choice + "'");
        }
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

    private static String arch() {
        return System.getProperty("os.arch", "");
    }
}
