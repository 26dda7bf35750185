// Which dtype parameters are gathered and computed in, and which dtype gradients are reduced
// in; the master copy the optimizer updates is always fp32 (FSDP2's MixedPrecisionPolicy
// without output/buffer dtypes, which this model does not need). Immutable.
package org.fsdp4j.api;


public record MixedPrecisionPolicy(DType paramDtype, DType reduceDtype) {

    public static final MixedPrecisionPolicy FP32 = new MixedPrecisionPolicy(DType.F32, DType.F32);

    public MixedPrecisionPolicy {
        if (paramDtype == null || reduceDtype == null || !paramDtype.isFloating() || !reduceDtype.isFloating()) {
            throw new IllegalArgumentException("param and reduce dtypes must be one of fp32, bf16, fp16; got "
                    + paramDtype + " and " + reduceDtype);
        }
    }

    /** Parses the command-line names (fp32, bf16, fp16). */
    public static MixedPrecisionPolicy parse(String paramDtype, String reduceDtype) {
        return new MixedPrecisionPolicy(DType.parseFloating(paramDtype), DType.parseFloating(reduceDtype));
    }

    /** fp16 anywhere in the gradient path overflows without a loss scale; bf16 and fp32 do not. */
    public boolean needsLossScaling() {
        return paramDtype == DType.F16 || reduceDtype == DType.F16;
    }

    @Override
    public String toString() {
        return "param " + paramDtype.shortName() + ", reduce " + reduceDtype.shortName() + ", master fp32";
    }
}
