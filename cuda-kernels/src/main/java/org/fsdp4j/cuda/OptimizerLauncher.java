// Launcher for optimizer.cu; AdamW's bias corrections and decay become scalars here, once per call.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;

final class OptimizerLauncher {

    private final Kernel adamw;
    private final Kernel sgd;

    OptimizerLauncher(KernelSource m) {
        adamw = m.kernel("adamw_kernel");
        sgd = m.kernel("sgd_momentum_kernel");
    }

    void adamW(CudaStream s, Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep st) {
        long n = param.numel();
        double bc1 = 1 - Math.pow(st.beta1(), st.step());
        double bc2 = 1 - Math.pow(st.beta2(), st.step());
        float stepSize = (float) (st.lr() / bc1);
        float bc2Sqrt = (float) Math.sqrt(bc2);
        float decay = (float) (1 - (double) st.lr() * st.weightDecay());
        adamw.launchStrided(s, n, address(param), address(grad), code(grad), address(m),
                address(v), n, st.beta1(), st.beta2(), st.eps(), st.gradScale(), stepSize, bc2Sqrt, decay);
    }

    void sgdMomentum(CudaStream s, Tensor param, Tensor grad, Tensor buf, float lr, float momentum,
                     float weightDecay, float gradScale) {
        long n = param.numel();
        sgd.launchStrided(s, n, address(param), address(grad), code(grad), address(buf), n, lr,
                momentum, weightDecay, gradScale);
    }
}
