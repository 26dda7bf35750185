// One global batch of training data on the host, as a user hands it to ShardedModel.step: named
// fields (int or float arrays with a shape) whose first dimension is the sample. The runtime
// splits the samples over the ranks and their micro-batches in order and uploads each part as
// the model's Inputs. The trainer's batches (BatchSampler) are of this type too, so there is one.
package org.fsdp4j.api;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * One global batch of training data on the host: named fields, each an {@code int[]} or
 * {@code float[]} with a row-major shape whose dimension 0 is the sample. A step gives rank r of
 * N the samples {@code [r·B/N, (r+1)·B/N)}, split in order into its micro-batches, so B must be
 * a multiple of N times the micro-batch count. A model receives each part as {@link Inputs}
 * with the same names: int fields as {@link DType#I32} tensors, float fields as {@link DType#F32}.
 *
 * <pre>{@code
 * Batch batch = Batch.of(Batch.floats("images", pixels, 64, 16, 48),
 *                        Batch.ints("labels", labels, 64));
 * }</pre>
 */
public final class Batch {

    /**
     * One named field of a batch: its values, row-major, and its shape (dimension 0 is the sample).
     * Make one with {@link Batch#ints} or {@link Batch#floats}.
     */
    public static final class Field {
        private final String name;
        private final long[] shape;
        private final int[] ints;
        private final float[] floats;

        private Field(String name, long[] shape, int[] ints, float[] floats) {
            if (name == null || name.isBlank()) {
                throw new IllegalArgumentException("a batch field needs a name");
            }
            if (shape.length == 0) {
                throw new IllegalArgumentException("field '" + name + "' needs a shape whose dimension 0 is the sample");
            }
            long n = Tensor.numelOf(shape);
            long have = ints != null ? ints.length : floats.length;
            if (n != have) {
                throw new IllegalArgumentException("field '" + name + "' has shape " + Arrays.toString(shape) + " ("
                        + n + " values) but " + have + " values were given");
            }
            this.name = name;
            this.shape = shape.clone();
            this.ints = ints;
            this.floats = floats;
        }

        /**
         * The field's name, which the model reads it by.
         *
         * @return the name
         */
        public String name() {
            return name;
        }

        /**
         * The field's shape; dimension 0 is the sample.
         *
         * @return a copy of the shape
         */
        public long[] shape() {
            return shape.clone();
        }

        /**
         * The dtype of the tensor the model receives: I32 for int fields, F32 for float fields.
         *
         * @return the device dtype
         */
        public DType dtype() {
            return ints != null ? DType.I32 : DType.F32;
        }

        /**
         * Values per sample: the product of the dimensions after the first.
         *
         * @return elements per sample
         */
        public long sampleElements() {
            return Tensor.numelOf(Arrays.copyOfRange(shape, 1, shape.length));
        }

        /**
         * The values of an int field (not copied).
         *
         * @return the values
         * @throws IllegalStateException for a float field
         */
        public int[] ints() {
            if (ints == null) {
                throw new IllegalStateException("field '" + name + "' holds floats");
            }
            return ints;
        }

        /**
         * The values of a float field (not copied).
         *
         * @return the values
         * @throws IllegalStateException for an int field
         */
        public float[] floats() {
            if (floats == null) {
                throw new IllegalStateException("field '" + name + "' holds ints");
            }
            return floats;
        }

        @Override
        public String toString() {
            return name + Arrays.toString(shape) + " " + dtype().shortName();
        }
    }

    private final List<Field> fields;
    private final int samples;

    private Batch(List<Field> fields) {
        if (fields.isEmpty()) {
            throw new IllegalArgumentException("a batch needs at least one field");
        }
        Set<String> names = new HashSet<>();
        long first = fields.get(0).shape[0];
        for (Field f : fields) {
            if (!names.add(f.name)) {
                throw new IllegalArgumentException("two batch fields are named '" + f.name + "'");
            }
            if (f.shape[0] != first) {
                throw new IllegalArgumentException("field '" + f.name + "' has " + f.shape[0] + " samples but '"
                        + fields.get(0).name + "' has " + first + ": every field's dimension 0 is the sample");
            }
        }
        if (first < 1 || first > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a batch needs 1 to 2^31-1 samples, got " + first);
        }
        this.fields = List.copyOf(fields);
        this.samples = (int) first;
    }

    /**
     * A batch of these fields, in this order (the order the model's {@link Inputs} list them).
     *
     * @param fields one or more fields with distinct names and the same dimension 0
     * @return the batch
     * @throws IllegalArgumentException if the fields are empty, share a name or disagree on the sample count
     */
    public static Batch of(Field... fields) {
        return new Batch(new ArrayList<>(Arrays.asList(fields)));
    }

    /**
     * An int field (token ids, class labels), received by the model as an I32 tensor.
     *
     * @param name   the name the model reads it by
     * @param values the values, row-major (kept, not copied)
     * @param shape  the shape; dimension 0 is the sample
     * @return the field
     * @throws IllegalArgumentException if the shape does not hold exactly {@code values.length} values
     */
    public static Field ints(String name, int[] values, long... shape) {
        return new Field(name, shape, values, null);
    }

    /**
     * A float field (pixels, features), received by the model as an F32 tensor.
     *
     * @param name   the name the model reads it by
     * @param values the values, row-major (kept, not copied)
     * @param shape  the shape; dimension 0 is the sample
     * @return the field
     * @throws IllegalArgumentException if the shape does not hold exactly {@code values.length} values
     */
    public static Field floats(String name, float[] values, long... shape) {
        return new Field(name, shape, null, values);
    }

    /**
     * The fields, in order.
     *
     * @return an unmodifiable list
     */
    public List<Field> fields() {
        return fields;
    }

    /**
     * The field named {@code name}.
     *
     * @param name a field's name
     * @return the field
     * @throws IllegalArgumentException naming the fields there are, if none has that name
     */
    public Field field(String name) {
        for (Field f : fields) {
            if (f.name.equals(name)) {
                return f;
            }
        }
        throw new IllegalArgumentException("the batch has no field '" + name + "'; it has "
                + fields.stream().map(Field::name).toList());
    }

    /**
     * Samples in the batch: dimension 0 of every field.
     *
     * @return B
     */
    public int samples() {
        return samples;
    }

    @Override
    public String toString() {
        return "Batch" + fields;
    }
}
