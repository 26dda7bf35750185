// Which dtype parameters are gathered and computed in, and which dtype gradients are reduced
// in; the master copy the optimizer updates is always fp32 (FSDP2's MixedPrecisionPolicy
// without output/buffer dtypes, which this model does not need). Immutable.
package org.fsdp4j.api;


/**
 * The dtypes of mixed-precision training, as FSDP2's {@code MixedPrecisionPolicy} (without its
 * output and buffer dtypes). The optimizer always updates an fp32 master copy of each shard; the
 * policy sets the dtype the parameters are all-gathered and computed in (and so the dtype of the
 * model's activations, {@link ModelContext#computeDtype()}), and the dtype gradients are reduced
 * across ranks in. Immutable.
 *
 * <pre>{@code
 * new MixedPrecisionPolicy(DType.BF16, DType.F32)   // bf16 compute, fp32 gradient reduction
 * }</pre>
 *
 * @param paramDtype  the dtype parameters are gathered and computed in: F32, BF16 or F16
 * @param reduceDtype the dtype gradients are reduce-scattered or all-reduced in: F32, BF16 or F16
 */
public record MixedPrecisionPolicy(DType paramDtype, DType reduceDtype) {

    /** Everything in fp32: no mixed precision (the default of {@link FsdpOptions}). */
    public static final MixedPrecisionPolicy FP32 = new MixedPrecisionPolicy(DType.F32, DType.F32);

    /**
     * Checks the values.
     *
     * @param paramDtype  the dtype parameters are gathered and computed in: F32, BF16 or F16
     * @param reduceDtype the dtype gradients are reduce-scattered or all-reduced in: F32, BF16 or
     *                    F16
     * @throws IllegalArgumentException if a dtype is null or not floating (I32)
     */
    public MixedPrecisionPolicy {
        if (paramDtype == null || reduceDtype == null || !paramDtype.isFloating() || !reduceDtype.isFloating()) {
            throw new IllegalArgumentException("param and reduce dtypes must be one of fp32, bf16, fp16; got "
                    + paramDtype + " and " + reduceDtype);
        }
    }

    /**
     * A policy from the command line's names, as {@link DType#parseFloating} reads them.
     *
     * @param paramDtype  fp32, bf16 or fp16 (or an alias such as float32, bfloat16, half)
     * @param reduceDtype fp32, bf16 or fp16 (or an alias)
     * @return the policy
     * @throws IllegalArgumentException if a name is not a floating dtype, listing the accepted ones
     */
    public static MixedPrecisionPolicy parse(String paramDtype, String reduceDtype) {
        return new MixedPrecisionPolicy(DType.parseFloating(paramDtype), DType.parseFloating(reduceDtype));
    }

    /**
     * Whether training needs dynamic loss scaling (see {@link FsdpOptions.Builder#lossScaling}):
     * fp16 anywhere in the gradient path underflows or overflows without it; bf16 and fp32 have
     * fp32's exponent range and do not.
     *
     * @return true when either dtype is F16
     */
    public boolean needsLossScaling() {
        return paramDtype == DType.F16 || reduceDtype == DType.F16;
    }

    /**
     * The policy in words.
     *
     * @return e.g. "param bf16, reduce fp32, master fp32"
     */
    @Override
    public String toString() {
        return "param " + paramDtype.shortName() + ", reduce " + reduceDtype.shortName() + ", master fp32";
    }
}
