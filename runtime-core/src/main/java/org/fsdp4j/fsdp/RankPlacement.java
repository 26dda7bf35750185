// Which device each rank of this process runs on. On the CPU every rank shares the host. On GPUs
// "--device cuda" gives rank r the r-th visible GPU (the ranks then need NCCL between them), and
// "--device cuda:i" puts every rank on GPU i (they share it through the in-process group: for
// tests and trials, as one GPU cannot run NCCL between ranks of its own).
package org.fsdp4j.fsdp;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.fsdp4j.api.Device;
import org.fsdp4j.backend.BackendProvider;
import org.fsdp4j.backend.Backends;

public final class RankPlacement {

    private RankPlacement() {
    }

    /**
     * Rank r's device, for {@code worldSize} ranks asked for with --device {@code requested}
     * (as given: "auto", "cpu", "cuda" or "cuda:i"), which resolved to {@code resolved}.
     */
    public static List<Device> place(String requested, Device resolved, int worldSize) {
        boolean everyGpu = resolved.kind() == Device.Kind.CUDA && !requested.contains(":");
        if (!everyGpu || worldSize == 1) {
            return Collections.nCopies(worldSize, resolved);
        }
        int visible = Backends.provider(Device.Kind.CUDA).map(BackendProvider::deviceCount).orElse(0);
        if (worldSize > visible) {
            throw new IllegalArgumentException("--world-size " + worldSize + " on --device " + requested + " runs one rank"
                    + " per GPU, but " + visible + (visible == 1 ? " GPU is" : " GPUs are") + " visible: use --world-size "
                    + visible + ", or --device cuda:0 to run " + worldSize + " ranks on one GPU (for tests and trials)");
        }
        List<Device> devices = new ArrayList<>();
        for (int r = 0; r < worldSize; r++) {
            devices.add(Device.cuda(r));
        }
        return devices;
    }
}
