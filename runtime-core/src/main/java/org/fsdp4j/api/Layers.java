// The library's layers for SequentialModel, each a forward and a backward over Ops with the
// numerics of the built-in models' (Linear, LayerNorm): enough for MLPs, MLP-Mixers and the
// like. A user's own layer extends Layer the same way.
package org.fsdp4j.api;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Factories of the library's {@link Layer}s. */
public final class Layers {

    private Layers() {
    }

    /**
     * A fully connected layer over the last dimension, with a bias (PyTorch's nn.Linear; weights
     * drawn from N(0, 0.02²), bias zero).
     *
     * @param in  input features
     * @param out output features
     * @return the layer
     */
    public static Layer linear(int in, int out) {
        return new LinearLayer(in, out);
    }

    /**
     * GELU, GPT-2's tanh approximation, element-wise.
     *
     * @return the layer
     */
    public static Layer gelu() {
        return new GeluLayer();
    }

    /**
     * LayerNorm over the last dimension (eps 1e-5; weight one, bias zero).
     *
     * @param dim the last dimension
     * @return the layer
     */
    public static Layer layerNorm(int dim) {
        return new LayerNormLayer(dim);
    }

    /**
     * Swaps the last two dimensions: (B, M, N) to (B, N, M).
     *
     * @return the layer
     */
    public static Layer transpose() {
        return new TransposeLayer();
    }

    /**
     * The mean over dimension 1: (B, T, C) to (B, C) (pooling tokens or patches).
     *
     * @return the layer
     */
    public static Layer meanOverTokens() {
        return new MeanLayer();
    }

    /**
     * {@code x + inner(x)}: the layers in order, then the input added back.
     *
     * @param inner the layers of the branch; their output has the input's shape
     * @return the layer
     */
    public static Layer residual(Layer... inner) {
        return new ResidualLayer(List.of(inner));
    }

    private static final class LinearLayer extends Layer {
        private final Linear linear;
        private final int out;
        private Tensor x;

        LinearLayer(int in, int out) {
            this.linear = new Linear(in, out);
            this.out = out;
        }

        @Override
        protected List<ParamSpec> params(String prefix) {
            long in = (long) linear.inFeatures();
            return List.of(ParamSpec.normal(prefix + ".weight", 0.02, true, out, in), ParamSpec.zeros(prefix + ".bias", out));
        }

        @Override
        protected Tensor forward(Scope s, Tensor x) {
            this.x = x;
            long[] shape = x.shape();
            shape[shape.length - 1] = out;
            Tensor y = s.activation(shape);
            linear.forward(s.ops(), x, param(0), param(1), y);
            return y;
        }

        @Override
        protected Tensor backward(Scope s, Tensor dy, boolean inputGrad) {
            Tensor dx = inputGrad ? s.activation(x.shape()) : null;
            linear.backward(s.ops(), dy, x, param(0), dx, false, grad(0), grad(1));
            x = null;
            return dx;
        }
    }

    private static final class GeluLayer extends Layer {
        private Tensor x;

        @Override
        protected Tensor forward(Scope s, Tensor x) {
            this.x = x;
            Tensor y = s.activation(x.shape());
            s.ops().geluForward(x, y);
            return y;
        }

        @Override
        protected Tensor backward(Scope s, Tensor dy, boolean inputGrad) {
            Tensor dx = s.activation(x.shape());
            s.ops().geluBackward(x, dy, dx);
            x = null;
            return dx;
        }
    }

    private static final class LayerNormLayer extends Layer {
        private final LayerNorm norm;
        private final int dim;
        private Tensor x;
        private LayerNorm.Saved stats;

        LayerNormLayer(int dim) {
            this.norm = new LayerNorm(dim);
            this.dim = dim;
        }

        @Override
        protected List<ParamSpec> params(String prefix) {
            return List.of(ParamSpec.ones(prefix + ".weight", dim), ParamSpec.zeros(prefix + ".bias", dim));
        }

        @Override
        protected Tensor forward(Scope s, Tensor x) {
            this.x = x;
            Tensor y = s.activation(x.shape());
            stats = norm.forward(s.ops(), x, param(0), param(1), y);
            return y;
        }

        @Override
        protected Tensor backward(Scope s, Tensor dy, boolean inputGrad) {
            Tensor dx = s.activation(x.shape());
            norm.backward(s.ops(), stats, dy, x, param(0), dx, grad(0), grad(1));
            stats.close();
            stats = null;
            x = null;
            return dx;
        }
    }

    private static final class TransposeLayer extends Layer {
        private long[] shape;

        @Override
        protected Tensor forward(Scope s, Tensor x) {
            shape = x.shape();
            Tensor y = s.activation(shape[0], shape[2], shape[1]);
            s.ops().transpose(x, y);
            return y;
        }

        @Override
        protected Tensor backward(Scope s, Tensor dy, boolean inputGrad) {
            Tensor dx = s.activation(shape);
            s.ops().transposeBackward(dy, dx);
            return dx;
        }
    }

    private static final class MeanLayer extends Layer {
        private long[] shape;     // (B, T, C)
        private Tensor weights;   // (T) all 1/T

        @Override
        protected Tensor forward(Scope s, Tensor x) {
            if (x.rank() != 3) {
                throw new IllegalArgumentException("meanOverTokens takes (B, T, C), got " + x);
            }
            shape = x.shape();
            int b = (int) shape[0];
            int t = (int) shape[1];
            int c = (int) shape[2];
            weights = s.activation(t);
            s.ops().fill(weights, 1f / t);
            Tensor y = s.activation(b, c);   // y_b (1×C) = wᵀ (1×T) · x_b (T×C)
            s.ops().gemm(false, false, 1, c, t, 1f, weights, t, 0, x, c, (long) t * c, 0f, y, c, c, b);
            return y;
        }

        @Override
        protected Tensor backward(Scope s, Tensor dy, boolean inputGrad) {
            int b = (int) shape[0];
            int t = (int) shape[1];
            int c = (int) shape[2];
            Tensor dx = s.activation(shape);  // dx_b (T×C) = w (T×1) · dy_b (1×C)
            s.ops().gemm(false, false, t, c, 1, 1f, weights, 1, 0, dy, c, c, 0f, dx, c, (long) t * c, b);
            return dx;
        }
    }

    private static final class ResidualLayer extends Layer {
        private final List<Layer> inner;
        private long[] shape;

        ResidualLayer(List<Layer> inner) {
            if (inner.isEmpty()) {
                throw new IllegalArgumentException("a residual needs at least one layer");
            }
            this.inner = List.copyOf(inner);
        }

        @Override
        List<Layer> children() {
            return inner;
        }

        @Override
        protected Tensor forward(Scope s, Tensor x) {
            shape = x.shape();
            Tensor h = x;
            for (Layer l : inner) {
                h = l.forward(s, h);
            }
            if (!Arrays.equals(h.shape(), shape)) {
                throw new IllegalArgumentException("a residual branch maps " + Arrays.toString(shape) + " to "
                        + Arrays.toString(h.shape()) + "; it must keep the shape");
            }
            s.ops().accumulate(h, x);        // no layer keeps its own output, so h may take the sum
            return h;
        }

        @Override
        protected Tensor backward(Scope s, Tensor dy, boolean inputGrad) {
            List<Layer> reversed = new ArrayList<>(inner);
            java.util.Collections.reverse(reversed);
            Tensor d = dy;
            for (Layer l : reversed) {
                d = l.backward(s, d, true);
            }
            s.ops().accumulate(d, dy);       // the identity path
            return d;
        }
    }
}
