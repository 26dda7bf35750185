// The probe's reading of CUDA versions: only a driver of an older CUDA major than this build's stops
// a GPU run (minor-version compatibility runs 13.1 on a 13.0 driver), and the reason names both
// versions and the ways out once each.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import org.junit.jupiter.api.Test;

class DriverVersionTest {

    @Test
    void versionsReadAsCudaWritesThem() {
        assertEquals("12.4", CudaProbe.cudaVersion(12040));
        assertEquals("13.1", CudaProbe.cudaVersion(13010));
        assertEquals("13.0", CudaProbe.cudaVersion(13000));
        assertEquals("12.9", CudaProbe.cudaVersion(12090));
        assertEquals("11.8", CudaProbe.cudaVersion(11080));
        assertEquals("13.10", CudaProbe.cudaVersion(13100));
    }

    @Test
    void aDriverOfTheSameMajorOrNewerRunsThisBuild() {
        assertEquals(Optional.empty(), CudaProbe.driverTooOld(13000, 13010), "minor-version compatibility");
        assertEquals(Optional.empty(), CudaProbe.driverTooOld(13010, 13010));
        assertEquals(Optional.empty(), CudaProbe.driverTooOld(13020, 13010));
        assertEquals(Optional.empty(), CudaProbe.driverTooOld(14000, 13010));
        assertEquals(Optional.empty(), CudaProbe.driverTooOld(12040, 12090), "a CUDA 12 build on a 12.4 driver");
        assertEquals(Optional.empty(), CudaProbe.driverTooOld(0, 13010), "unknown: the runtime decides");
    }

    @Test
    void anOlderMajorStopsNamingBothVersionsAndTheWaysOut() {
        String why = CudaProbe.driverTooOld(12090, 13010).orElseThrow();
        assertTrue(why.startsWith("the NVIDIA driver supports CUDA 12.9 but this fsdp4j was built for CUDA 13.1: "), why);
        assertTrue(why.contains("NVIDIA driver R580 or newer"), why);
        assertTrue(why.contains("forward-compatibility package cuda-compat-13-1"), why);
        assertTrue(why.contains("/usr/local/cuda/compat"), why);
        assertTrue(why.contains("LD_LIBRARY_PATH"), why);
        assertEquals(1, why.split("cuda-compat", -1).length - 1, why);

        String old = CudaProbe.driverTooOld(11080, 13010).orElseThrow();
        assertTrue(old.contains("CUDA 11.8") && old.contains("CUDA 13.1"), old);

        String twelve = CudaProbe.driverTooOld(11040, 12090).orElseThrow();
        assertTrue(twelve.contains("R525 or newer") && twelve.contains("cuda-compat-12-9"), twelve);
    }

    @Test
    void thisBuildKnowsTheCudaItWasBuiltFor() {
        assertTrue(CudaProbe.BUILT_FOR >= 12000, String.valueOf(CudaProbe.BUILT_FOR));
        System.out.println("built for CUDA " + CudaProbe.cudaVersion(CudaProbe.BUILT_FOR));
    }
}
