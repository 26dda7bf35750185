// One pre-LN block through its unit (parameters and gradients bound by a ParameterStore):
// forward against fp64, d(input) and all twelve parameter gradients against central
// differences of the fp64 block.
package org.fsdp4j.model;

import java.util.List;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class BlockTest {

    @Test
    void backwardMatchesFiniteDifferences() {
        GradCheck gc = new GradCheck();
        int b = 2, t = 4, c = 8, heads = 2, n = b * t;
        GptConfig cfg = new GptConfig(16, t, 1, heads, c);
        Block block = new Block(cfg, 0);
        Unit unit = new Unit("h.0", 1, block.paramSpecs());
        float[] x = gc.uniform(n * c, 1);
        float[] dout = gc.uniform(n * c, 1);
        List<ParamSpec> specs = block.paramSpecs();
        double[][] p = new double[specs.size()][];
        try (Backend be = GradCheck.cpuBackend();
             ParameterStore store = new ParameterStore(be, List.of(unit));
             Tensor xT = GradCheck.upload(be, x, b, t, c);
             Tensor out = GradCheck.zeros(be, b, t, c);
             Tensor dresidual = GradCheck.upload(be, dout, b, t, c)) {
            for (int i = 0; i < specs.size(); i++) {
                ParamSpec s = specs.get(i);
                int numel = (int) s.numel();
                float[] values = s.init() == ParamSpec.Init.ONES ? gc.around(numel, 1, 0.3) : gc.uniform(numel, 0.4);
                store.set(s.name(), values);
                p[i] = GradCheck.widen(values);
            }
            try (Block.Saved saved = block.forward(be, unit, xT, out)) {
                block.backward(be, unit, saved, xT, dresidual);
            }
            double[] xd = GradCheck.widen(x), r = GradCheck.widen(dout);
            gc.assertForward("block forward", be.toHost(out), RefOps.block(xd, b, t, c, heads, p));
            gc.assertGradient("block dinp", be.toHost(dresidual), GradCheck.finiteDifference(xd,
                    v -> RefOps.dot(r, RefOps.block(v, b, t, c, heads, p))));
            for (int i = 0; i < specs.size(); i++) {
                gc.assertGradient("block d" + specs.get(i).name(), store.grad(specs.get(i).name()),
                        GradCheck.finiteDifference(p[i], v -> RefOps.dot(r, RefOps.block(xd, b, t, c, heads, p))));
            }
        }
    }
}
