// Where one model parameter's values are in a checkpoint: a tensor's name and how its layout relates
// to the parameter's. Hugging Face's Llama stores every weight as fsdp4j does (Linear's (out, in));
// GPT-2's Conv1D weights are stored (in, out), the transpose of fsdp4j's Linear weights.
package org.fsdp4j.weights;

public record TensorRef(String tensor, Layout layout) {

    /** How the checkpoint tensor's elements map onto the parameter's. */
    public enum Layout {
        /** The same shape and order. */
        AS_IS,
        /** A 2-D tensor (C, R) holding the parameter (R, C) transposed. */
        TRANSPOSED
    }

    public TensorRef {
        if (tensor == null || tensor.isEmpty() || layout == null) {
            throw new IllegalArgumentException("a tensor reference needs a name and a layout");
        }
    }

    public static TensorRef asIs(String tensor) {
        return new TensorRef(tensor, Layout.AS_IS);
    }

    public static TensorRef transposed(String tensor) {
        return new TensorRef(tensor, Layout.TRANSPOSED);
    }
}
