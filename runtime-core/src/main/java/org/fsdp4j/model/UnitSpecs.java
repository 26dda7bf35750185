// The parameter specs of each unit of a GPT, root first, then one list per block: what the
// model's units hold, available before any model or backend exists (for the preflight's memory
// estimate and, later, the planner).
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.ParamSpec;

public final class UnitSpecs {

    private UnitSpecs() {
    }

    /** [root, h.0, ..., h.(L-1)], each in the order the unit lays its parameters out. */
    public static List<List<ParamSpec>> of(GptConfig config) {
        List<List<ParamSpec>> units = new ArrayList<>();
        List<ParamSpec> root = new ArrayList<>();
        for (RootParam p : RootParam.values()) {
            root.add(p.spec(config));
        }
        units.add(List.copyOf(root));
        for (int layer = 0; layer < config.numLayers(); layer++) {
            List<ParamSpec> block = new ArrayList<>();
            for (BlockParam p : BlockParam.values()) {
                block.add(p.spec(config, layer));
            }
            units.add(List.copyOf(block));
        }
        return List.copyOf(units);
    }
}
