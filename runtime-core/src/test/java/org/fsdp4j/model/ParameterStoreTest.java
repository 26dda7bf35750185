// The unsharded store: the parameter names, shapes, init and decay flags the parity and FSDP
// code rely on; initialize equals ParamInit; get/set round-trips; memory is tracked as PARAMS
// and GRADS and freed (and the units unbound) on close.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.ParamInit;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Unit;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class ParameterStoreTest {

    @Test
    void namesShapesInitAndDecayFollowNanoGpt() {
        GptConfig cfg = new GptConfig(11, 7, 2, 2, 4);
        try (GptModel model = new GptModel(cfg, null, false)) {
            List<ParamSpec> root = model.units().get(0).params();
            assertEquals(List.of("wte", "wpe", "lnf.weight", "lnf.bias"), root.stream().map(ParamSpec::name).toList());
            assertArrayEquals(new long[] {11, 4}, root.get(0).shape());
            assertArrayEquals(new long[] {7, 4}, root.get(1).shape());
            List<ParamSpec> h1 = model.units().get(2).params();
            assertEquals(List.of("h.1.ln1.weight", "h.1.ln1.bias", "h.1.attn.qkv.weight", "h.1.attn.qkv.bias",
                    "h.1.attn.proj.weight", "h.1.attn.proj.bias", "h.1.ln2.weight", "h.1.ln2.bias",
                    "h.1.mlp.fc.weight", "h.1.mlp.fc.bias", "h.1.mlp.proj.weight", "h.1.mlp.proj.bias"),
                    h1.stream().map(ParamSpec::name).toList());
            assertArrayEquals(new long[] {12, 4}, h1.get(2).shape());
            assertArrayEquals(new long[] {4, 16}, h1.get(10).shape());
            for (Unit u : model.units()) {
                for (ParamSpec s : u.params()) {
                    assertEquals(s.shape().length == 2, s.weightDecay(), "decay only on 2-D weights: " + s);
                    double expectedStd = s.name().endsWith("proj.weight") ? 0.02 / Math.sqrt(2 * cfg.numLayers())
                            : s.shape().length == 2 ? 0.02 : 0;
                    assertEquals(expectedStd, s.initStd(), 1e-12, s.toString());
                    ParamSpec.Init expectedInit = s.shape().length == 2 ? ParamSpec.Init.NORMAL
                            : s.name().endsWith("weight") ? ParamSpec.Init.ONES : ParamSpec.Init.ZEROS;
                    assertEquals(expectedInit, s.init(), s.toString());
                }
            }
        }
    }

    @Test
    void initializeGetSetAndMemory() {
        GradCheck gc = new GradCheck();
        GptConfig cfg = new GptConfig(11, 7, 2, 2, 4);
        try (Backend be = GradCheck.cpuBackend()) {
            GptModel model = new GptModel(cfg, be, false);
            ParameterStore store = new ParameterStore(be, model.units());
            assertEquals(4 * cfg.parameterCount(), be.memory().liveBytes(MemoryCategory.PARAMS));
            assertEquals(4 * cfg.parameterCount(), be.memory().liveBytes(MemoryCategory.GRADS));
            assertEquals(cfg.parameterCount(), store.numel());

            store.initialize(gc.seed);
            for (ParameterStore.Entry e : store.entries()) {
                float[] expected = new float[(int) e.spec().numel()];
                ParamInit.fill(e.spec(), gc.seed, expected);
                assertArrayEquals(expected, store.get(e.spec().name()), e.spec().name());
                assertArrayEquals(new float[expected.length], store.grad(e.spec().name()), "grads start at zero");
            }
            float[] v = gc.uniform(3 * 4 * 4, 1);
            store.set("h.0.attn.qkv.weight", v);
            assertArrayEquals(v, store.get("h.0.attn.qkv.weight"));
            assertArrayEquals(v, be.toHost(model.units().get(1).param(2)), "the unit sees the store's view");

            IllegalArgumentException unknown = assertThrows(IllegalArgumentException.class, () -> store.get("h.9.ln1"));
            assertTrue(unknown.getMessage().contains("h.9.ln1"), unknown.getMessage());
            assertThrows(IllegalArgumentException.class, () -> store.set("wte", new float[3]));

            store.close();
            assertFalse(model.units().get(0).paramsBound());
            assertEquals(0, be.memory().liveBytes(MemoryCategory.PARAMS));
            assertEquals(0, be.memory().liveBytes(MemoryCategory.GRADS));
        }
    }
}
