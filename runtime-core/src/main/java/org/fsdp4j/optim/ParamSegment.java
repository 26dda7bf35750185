// One contiguous piece of parameters that an optimizer updates: a rank's slice of a parameter
// (FSDP shard) or, in tests, a whole one. Optimizers never assume more than this.
package org.fsdp4j.optim;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

/**
 * @param param       fp32 values updated in place
 * @param grad        the gradient, any float dtype, same numel
 * @param m           fp32 first state buffer (AdamW's m, SGD's momentum), same numel
 * @param v           fp32 second state buffer (AdamW's v); null for optimizers with one buffer
 * @param weightDecay whether decoupled weight decay applies (2-D weights yes, biases and gains no)
 */
public record ParamSegment(Tensor param, Tensor grad, Tensor m, Tensor v, boolean weightDecay) {

    public ParamSegment {
        if (param == null || grad == null || m == null) {
            throw new IllegalArgumentException("a parameter segment needs param, grad and m buffers");
        }
        if (param.dtype() != DType.F32 || m.dtype() != DType.F32 || (v != null && v.dtype() != DType.F32)) {
            throw new IllegalArgumentException("param and optimizer state must be fp32: " + param + ", " + m
                    + ", " + v);
        }
        long n = param.numel();
        if (grad.numel() != n || m.numel() != n || (v != null && v.numel() != n)) {
            throw new IllegalArgumentException("segment buffers differ in size: param " + param + ", grad " + grad
                    + ", m " + m + ", v " + v);
        }
    }

    public long numel() {
        return param.numel();
    }
}
