// The device one emulator test case runs on: buffers with their initial bytes, behind tensors
// whose fake device addresses (BASE + buffer id·2^32 + byte offset) the real launchers pass to
// the kernels, and a KernelSource that records every launch the launchers make (grid, block,
// arguments, and whether it went through launchStrided, i.e. may be run on fewer blocks). The
// runner (src/test/emulator/runner.cc) gets these as a plan and an image, and maps each fake
// address back to its buffer.
package org.fsdp4j.cuda;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Storage;

final class EmuDevice implements KernelSource {

    static final long BASE = 0x7e00_0000_0000L;

    /** Every kernel the emulator build holds: src/main/cuda's and its own self-test kernels. */
    static final Map<String, List<KernelSources.Param>> KERNELS = allKernels();

    record Launch(String kernel, long gridX, int gridY, int blockX, int blockY, boolean strided, Object[] args) {
    }

    private static final class EmuStorage extends Storage implements DeviceAddressable {
        final int id;

        EmuStorage(int id, long numBytes, MemoryTracker tracker) {
            super(Device.cuda(0), numBytes, MemoryCategory.ACTIVATIONS, tracker);
            this.id = id;
        }

        @Override
        public long address() {
            return BASE + ((long) id << 32);
        }

        @Override
        protected void release() {
        }
    }

    private final MemoryTracker tracker = new MemoryTracker("emulator");
    private final List<ByteBuffer> initial = new ArrayList<>();
    private final List<Launch> launches = new ArrayList<>();
    private boolean nextIsStrided;

    private static Map<String, List<KernelSources.Param>> allKernels() {
        Map<String, List<KernelSources.Param>> all = new HashMap<>(KernelSources.kernels(KernelSources.MAIN));
        all.putAll(KernelSources.kernels(EmuToolchain.EMULATOR_DIR));
        return all;
    }

    /** A new buffer of {@code d} and {@code shape}, every byte 0xFF (NaN in each float dtype, −1 in I32). */
    Tensor allocate(DType d, long... shape) {
        long numBytes = Tensor.numelOf(shape) * d.byteSize();
        ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(numBytes)).order(ByteOrder.LITTLE_ENDIAN);
        Arrays.fill(b.array(), (byte) 0xff);
        initial.add(b);
        return Tensor.owning(new EmuStorage(initial.size() - 1, numBytes, tracker), d, shape);
    }

    /** Stores {@code values} rounded to t's dtype; returns them as stored (what the kernel reads). */
    double[] put(Tensor t, double[] values) {
        requireNumel(t, values.length);
        ByteBuffer b = initial.get(id(t));
        double[] stored = new double[values.length];
        for (int i = 0; i < values.length; i++) {
            stored[i] = write(b, t.dtype(), t.byteOffset() + (long) i * t.dtype().byteSize(), (float) values[i]);
        }
        return stored;
    }

    void putInts(Tensor t, int[] values) {
        requireNumel(t, values.length);
        ByteBuffer b = initial.get(id(t));
        for (int i = 0; i < values.length; i++) {
            b.putInt(Math.toIntExact(t.byteOffset() + 4L * i), values[i]);
        }
    }

    /** A tensor's elements in a memory image as doubles (I32 as its integers). */
    static double[] read(List<ByteBuffer> image, Tensor t) {
        ByteBuffer b = image.get(id(t));
        double[] out = new double[Math.toIntExact(t.numel())];
        int size = t.dtype().byteSize();
        for (int i = 0; i < out.length; i++) {
            int at = Math.toIntExact(t.byteOffset() + (long) i * size);
            switch (t.dtype()) {
                case F32: out[i] = b.getFloat(at); break;
                case F16: out[i] = DType.halfToFloat(b.getShort(at)); break;
                case BF16: out[i] = DType.bf16ToFloat(b.getShort(at)); break;
                case I32: out[i] = b.getInt(at); break;
                default: throw new IllegalArgumentException("no reader for " + t.dtype());
            }
        }
        return out;
    }

    private static float write(ByteBuffer b, DType d, long byteAt, float v) {
        int at = Math.toIntExact(byteAt);
        switch (d) {
            case F32: b.putFloat(at, v); return v;
            case F16: b.putShort(at, DType.floatToHalf(v)); return DType.halfToFloat(DType.floatToHalf(v));
            case BF16: b.putShort(at, DType.floatToBf16(v)); return DType.bf16ToFloat(DType.floatToBf16(v));
            default: throw new IllegalArgumentException("put() stores float dtypes; use putInts for " + d);
        }
    }

    private static void requireNumel(Tensor t, int n) {
        if (t.numel() != n) {
            throw new IllegalArgumentException(n + " values for " + t);
        }
    }

    static int id(Tensor t) {
        return ((EmuStorage) t.storage()).id;
    }

    List<ByteBuffer> initialImage() {
        return initial;
    }

    List<Launch> launches() {
        return launches;
    }

    @Override
    public Kernel kernel(String name) {
        List<KernelSources.Param> params = KERNELS.get(name);
        if (params == null) {
            throw new IllegalArgumentException("no extern \"C\" kernel named " + name);
        }
        return new Kernel() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public void launchStrided(CudaStream stream, long numel, Object... args) {
                nextIsStrided = true;
                Kernel.super.launchStrided(stream, numel, args);
            }

            @Override
            public void launch2d(CudaStream stream, long gridX, int gridY, int blockX, int blockY, int sharedBytes,
                                 Object... args) {
                boolean strided = nextIsStrided;
                nextIsStrided = false;
                if (args.length != params.size() || sharedBytes != 0) {
                    throw new IllegalArgumentException(name + ": " + args.length + " arguments for "
                            + params.size() + " parameters, " + sharedBytes + " dynamic shared bytes");
                }
                for (int i = 0; i < args.length; i++) {
                    if (args[i].getClass() != params.get(i).javaType) {
                        throw new IllegalArgumentException(name + ": argument " + i + " is a "
                                + args[i].getClass().getSimpleName() + ", the kernel takes " + params.get(i));
                    }
                }
                launches.add(new Launch(name, gridX, gridY, blockX, blockY, strided, args.clone()));
            }
        };
    }
}
