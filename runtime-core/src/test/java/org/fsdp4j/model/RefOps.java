// Test-only fp64 reference forwards of every GPT layer, written as plainly as possible on
// row-major double arrays. The fp32 backend's analytic gradients are checked against central
// finite differences of these.
package org.fsdp4j.model;

final class RefOps {

    static final double LN_EPS = 1e-5;

    private RefOps() {
    }

    /** out (B·T, C) = wte[tokens] + wpe[t]. */
    static double[] embedding(int[] tokens, int b, int t, double[] wte, double[] wpe, int c) {
        double[] out = new double[b * t * c];
        for (int bi = 0; bi < b; bi++) {
            for (int ti = 0; ti < t; ti++) {
                int tok = tokens[bi * t + ti];
                for (int ci = 0; ci < c; ci++) {
                    out[(bi * t + ti) * c + ci] = wte[tok * c + ci] + wpe[ti * c + ci];
                }
            }
        }
        return out;
    }

    /** LayerNorm of each of the n rows of x (n, c), biased variance, eps 1e-5. */
    static double[] layerNorm(double[] x, int n, int c, double[] w, double[] bias) {
        double[] out = new double[n * c];
        for (int i = 0; i < n; i++) {
            double mean = 0;
            for (int j = 0; j < c; j++) {
                mean += x[i * c + j];
            }
            mean /= c;
            double var = 0;
            for (int j = 0; j < c; j++) {
                double d = x[i * c + j] - mean;
                var += d * d;
            }
            var /= c;
            double rstd = 1 / Math.sqrt(var + LN_EPS);
            for (int j = 0; j < c; j++) {
                out[i * c + j] = (x[i * c + j] - mean) * rstd * w[j] + bias[j];
            }
        }
        return out;
    }

    /** out (n, oc) = x (n, ic) · wᵀ + bias; w (oc, ic); bias may be null. */
    static double[] linear(double[] x, int n, int ic, double[] w, double[] bias, int oc) {
        double[] out = new double[n * oc];
        for (int i = 0; i < n; i++) {
            for (int o = 0; o < oc; o++) {
                double s = bias == null ? 0 : bias[o];
                for (int k = 0; k < ic; k++) {
                    s += x[i * ic + k] * w[o * ic + k];
                }
                out[i * oc + o] = s;
            }
        }
        return out;
    }

    static double[] gelu(double[] x) {
        double[] out = new double[x.length];
        double s = Math.sqrt(2 / Math.PI);
        for (int i = 0; i < x.length; i++) {
            double v = x[i];
            out[i] = 0.5 * v * (1 + Math.tanh(s * (v + 0.044715 * v * v * v)));
        }
        return out;
    }

    static double[] add(double[] a, double[] b) {
        double[] out = new double[a.length];
        for (int i = 0; i < a.length; i++) {
            out[i] = a[i] + b[i];
        }
        return out;
    }

    /** Causal multi-head attention core: qkv (B·T, 3C) laid out [q | k | v] → y (B·T, C). */
    static double[] attentionCore(double[] qkv, int b, int t, int c, int heads) {
        int hs = c / heads;
        double scale = 1 / Math.sqrt(hs);
        double[] y = new double[b * t * c];
        double[] row = new double[t];
        for (int bi = 0; bi < b; bi++) {
            for (int h = 0; h < heads; h++) {
                for (int i = 0; i < t; i++) {
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j <= i; j++) {
                        double s = 0;
                        for (int d = 0; d < hs; d++) {
                            s += qkv[(bi * t + i) * 3 * c + h * hs + d] * qkv[(bi * t + j) * 3 * c + c + h * hs + d];
                        }
                        row[j] = s * scale;
                        max = Math.max(max, row[j]);
                    }
                    double sum = 0;
                    for (int j = 0; j <= i; j++) {
                        row[j] = Math.exp(row[j] - max);
                        sum += row[j];
                    }
                    for (int d = 0; d < hs; d++) {
                        double acc = 0;
                        for (int j = 0; j <= i; j++) {
                            acc += row[j] / sum * qkv[(bi * t + j) * 3 * c + 2 * c + h * hs + d];
                        }
                        y[(bi * t + i) * c + h * hs + d] = acc;
                    }
                }
            }
        }
        return y;
    }

    /** Full attention sub-layer: proj(core(qkv(x))). */
    static double[] attention(double[] x, int b, int t, int c, int heads, double[] qkvW, double[] qkvB,
                              double[] projW, double[] projB) {
        double[] qkv = linear(x, b * t, c, qkvW, qkvB, 3 * c);
        return linear(attentionCore(qkv, b, t, c, heads), b * t, c, projW, projB, c);
    }

    static double[] mlp(double[] x, int n, int c, double[] fcW, double[] fcB, double[] projW, double[] projB) {
        return linear(gelu(linear(x, n, c, fcW, fcB, 4 * c)), n, 4 * c, projW, projB, c);
    }

    /** A pre-LN block; p holds the block's parameters in BlockParam order. */
    static double[] block(double[] x, int b, int t, int c, int heads, double[][] p) {
        int n = b * t;
        double[] a = attention(layerNorm(x, n, c, p[0], p[1]), b, t, c, heads, p[2], p[3], p[4], p[5]);
        double[] r = add(x, a);
        return add(r, mlp(layerNorm(r, n, c, p[6], p[7]), n, c, p[8], p[9], p[10], p[11]));
    }

    /** Mean over the n rows of −log softmax(logits (n, v))[target]. */
    static double crossEntropy(double[] logits, int[] targets, int n, int v) {
        double total = 0;
        for (int i = 0; i < n; i++) {
            double max = Double.NEGATIVE_INFINITY;
            for (int j = 0; j < v; j++) {
                max = Math.max(max, logits[i * v + j]);
            }
            double sum = 0;
            for (int j = 0; j < v; j++) {
                sum += Math.exp(logits[i * v + j] - max);
            }
            total += Math.log(sum) + max - logits[i * v + targets[i]];
        }
        return total / n;
    }

    static double dot(double[] a, double[] b) {
        double s = 0;
        for (int i = 0; i < a.length; i++) {
            s += a[i] * b[i];
        }
        return s;
    }
}
