// A GPT whose unit hooks pass through a test's interceptor first: the fault tests throw or
// stall from it, the overlap test adds a fixed compute time per unit with it.
package org.fsdp4j.fsdp;

import java.util.List;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.TrainableModel;
import org.fsdp4j.api.Unit;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.model.GptModel;

final class HookedModel implements TrainableModel {

    /**
     * Called around the engine's hook: {@code hook} is "preForward", "postForward", "preBackward"
     * or "postBackward", {@code after} false before the engine's hook runs and true after it.
     */
    @FunctionalInterface
    interface Interceptor {
        void on(String hook, Unit unit, boolean after);
    }

    private final GptModel inner;
    private final Interceptor interceptor;

    HookedModel(GptModel inner, Interceptor interceptor) {
        this.inner = inner;
        this.interceptor = interceptor;
    }

    @Override
    public List<Unit> units() {
        return inner.units();
    }

    @Override
    public void forward(Inputs inputs, UnitHooks hooks, Tensor loss) {
        inner.forward(inputs, wrap(hooks), loss);
    }

    @Override
    public void backward(UnitHooks hooks, float lossScale) {
        inner.backward(wrap(hooks), lossScale);
    }

    @Override
    public void close() {
        inner.close();
    }

    private UnitHooks wrap(UnitHooks hooks) {
        return new UnitHooks() {
            @Override
            public void preForward(Unit unit) {
                interceptor.on("preForward", unit, false);
                hooks.preForward(unit);
                interceptor.on("preForward", unit, true);
            }

            @Override
            public void postForward(Unit unit, boolean last) {
                interceptor.on("postForward", unit, false);
                hooks.postForward(unit, last);
                interceptor.on("postForward", unit, true);
            }

            @Override
            public void preBackward(Unit unit, boolean readsParams) {
                interceptor.on("preBackward", unit, false);
                hooks.preBackward(unit, readsParams);
                interceptor.on("preBackward", unit, true);
            }

            @Override
            public void postBackward(Unit unit, boolean last) {
                interceptor.on("postBackward", unit, false);
                hooks.postBackward(unit, last);
                interceptor.on("postBackward", unit, true);
            }
        };
    }
}
