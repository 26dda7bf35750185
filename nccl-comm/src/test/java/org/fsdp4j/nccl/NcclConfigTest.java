// NCCL_CONFIG_INITIALIZER in Java: every int field past the header of whichever ncclConfig_t the
// presets wrap (NCCL 2.29 today; a presets upgrade may add fields) says "NCCL's default" (INT_MIN), and the
// header is the presets' size, magic and version; written and read back on the stand-in NCCL.
package org.fsdp4j.nccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.util.List;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.javacpp.Loader;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

class NcclConfigTest {

    private static List<String> setters() {
        return NativeNccl.UNDEF_INT_SETTERS.stream().map(Method::getName).toList();
    }

    @Test
    void everyIntFieldPastTheHeaderIsSet() {
        List<String> names = setters();
        assertTrue(names.containsAll(List.of("cgaClusterSize", "minCTAs", "maxCTAs", "splitShare", "trafficClass",
                "collnetEnable", "CTAPolicy", "shrinkShare", "nvlsCTAs")), names.toString());
        if (org.bytedeco.cuda.global.nccl.NCCL_VERSION_CODE >= 22900) {
            assertTrue(names.containsAll(List.of("nChannelsPerNetPeer", "nvlinkCentricSched", "graphUsageMode",
                    "numRmaCtx")), names.toString());
        }
        assertTrue(names.stream().noneMatch(List.of("magic", "version", "blocking")::contains), names.toString());
    }

    @Test
    @Tag("standin")
    void theConfigReadsBackAsTheInitializerWithBlockingSet() throws Exception {
        StandIns.assumeStandIns();
        try (ncclConfig_t c = NativeNccl.config(false)) {
            assertEquals(Loader.sizeof(ncclConfig_t.class), c.size());
            assertEquals(0xcafebeef, c.magic());
            assertEquals(org.bytedeco.cuda.global.nccl.NCCL_VERSION_CODE, c.version());
            assertEquals(0, c.blocking());
            assertNull(c.netName());
            assertNull(c.commName());
            for (String field : setters()) {
                assertEquals(Integer.MIN_VALUE, (int) ncclConfig_t.class.getMethod(field).invoke(c), field);
            }
        }
        try (ncclConfig_t c = NativeNccl.config(true)) {
            assertEquals(1, c.blocking());
        }
    }
}
