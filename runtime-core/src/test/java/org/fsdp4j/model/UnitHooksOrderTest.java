// The model calls the unit hooks in the documented execution order, and touches a unit's
// parameters only between its pre- and post- hooks, and its gradients only during its backward:
// the hooks here bind and unbind like FULL_SHARD FSDP does, so any access outside the window throws
// (a gradients-only backward segment gets no parameters, so reading one there throws too).
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class UnitHooksOrderTest {

    /** Records every call and binds a unit's views only while the unit may use them. */
    private static final class BindingHooks implements UnitHooks {
        final List<String> calls = new ArrayList<>();
        final ParameterStore store;

        BindingHooks(ParameterStore store) {
            this.store = store;
            store.units().forEach(u -> {
                u.unbindParams();
                u.unbindGrads();
            });
        }

        @Override
        public void preForward(Unit unit) {
            calls.add("preForward " + unit.name());
            bindParams(unit);
        }

        @Override
        public void postForward(Unit unit, boolean last) {
            calls.add("postForward " + unit.name() + (last ? "" : " (more)"));
            unit.unbindParams();
        }

        @Override
        public void preBackward(Unit unit, boolean readsParams) {
            calls.add("preBackward " + unit.name() + (readsParams ? "" : " (grads only)"));
            if (readsParams) {
                bindParams(unit);
            }
            List<Tensor> grads = new ArrayList<>();
            store.entries().stream().filter(e -> e.unit() == unit).forEach(e -> grads.add(e.grad()));
            unit.bindGrads(grads);
        }

        @Override
        public void postBackward(Unit unit, boolean last) {
            calls.add("postBackward " + unit.name() + (last ? "" : " (more)"));
            unit.unbindParams();
            unit.unbindGrads();
        }

        private void bindParams(Unit unit) {
            List<Tensor> params = new ArrayList<>();
            store.entries().stream().filter(e -> e.unit() == unit).forEach(e -> params.add(e.param()));
            unit.bindParams(params);
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void hooksRunInExecutionOrderAndGuardEveryAccess(boolean checkpoint) {
        GradCheck gc = new GradCheck();
        GptConfig cfg = new GptConfig(17, 8, 3, 2, 8);
        int b = 2, t = 8;
        try (Backend be = GradCheck.cpuBackend();
             GptModel model = new GptModel(cfg, be, checkpoint);
             ParameterStore store = new ParameterStore(be, model.units());
             Tensor tok = GradCheck.upload(be, gc.tokens(b * t, cfg.vocabSize()), b, t);
             Tensor tgt = GradCheck.upload(be, gc.tokens(b * t, cfg.vocabSize()), b, t)) {
            store.initialize(gc.seed);
            BindingHooks hooks = new BindingHooks(store);
            model.forward(tok, tgt, hooks);
            model.backward(hooks, 1f);
            assertEquals(List.of(
                    "preForward root", "postForward root (more)",
                    "preForward h.0", "postForward h.0",
                    "preForward h.1", "postForward h.1",
                    "preForward h.2", "postForward h.2",
                    "preForward root", "postForward root",
                    "preBackward root", "postBackward root (more)",
                    "preBackward h.2", "postBackward h.2",
                    "preBackward h.1", "postBackward h.1",
                    "preBackward h.0", "postBackward h.0",
                    "preBackward root (grads only)", "postBackward root"), hooks.calls);
        }
    }
}
