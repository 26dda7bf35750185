// Every launcher, driven without a GPU through a recording KernelSource: each launch must pass
// exactly the arguments its extern "C" kernel declares (count, and for each the Java type that
// KernelArgs packs into that C type), with a legal grid and block. A wrong argument would
// otherwise only show up on a GPU, as garbage or a crash.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.api.Storage;
import org.junit.jupiter.api.Test;

class LauncherSignatureTest {

    /** Device memory that is never touched: launches are only recorded. */
    static final class FakeDeviceStorage extends Storage implements DeviceAddressable {
        FakeDeviceStorage(long numBytes, MemoryTracker tracker) {
            super(Device.cuda(0), numBytes, MemoryCategory.ACTIVATIONS, tracker);
        }

        @Override
        public long address() {
            return 0x7f00_0000_0000L;
        }

        @Override
        protected void release() {
        }
    }

    final MemoryTracker tracker = new MemoryTracker("fake");
    final Map<String, List<KernelSources.Param>> signatures = KernelSources.kernels(KernelSources.MAIN);
    final TreeSet<String> launched = new TreeSet<>();

    final KernelSource recorder = name -> new Kernel() {
        @Override
        public String name() {
            return name;
        }

        @Override
        public void launch2d(CudaStream stream, long gridX, int gridY, int blockX, int blockY, int sharedBytes,
                             Object... args) {
            List<KernelSources.Param> want = signatures.get(name);
            assertTrue(want != null, "no extern \"C\" kernel named " + name);
            assertEquals(want.size(), args.length, name + ": argument count");
            for (int i = 0; i < args.length; i++) {
                assertEquals(want.get(i).javaType, args[i].getClass(), name + ": argument " + i);
            }
            assertTrue(gridX >= 1 && gridX <= Integer.MAX_VALUE && gridY >= 1 && gridY <= 65535, name + " grid");
            int threads = blockX * blockY;
            assertTrue(threads >= 32 && threads <= 1024 && threads % 32 == 0, name + " block " + blockX + "x" + blockY);
            launched.add(name);
        }
    };

    Tensor t(DType d, long... shape) {
        return Tensor.owning(new FakeDeviceStorage(Tensor.numelOf(shape) * d.byteSize(), tracker), d, shape);
    }

    @Test
    void everyLauncherPassesWhatItsKernelDeclares() {
        int b = 2, tt = 5, h = 3, hd = 4, c = h * hd, v = 7;
        Tensor x = t(DType.BF16, b, tt, c), y = t(DType.F32, b, tt, c), vec = t(DType.F32, c);
        Tensor stats = t(DType.F32, b * tt), tokens = t(DType.I32, b, tt);
        Tensor qkv = t(DType.F16, b, tt, 3 * c), heads = t(DType.F16, b, h, tt, hd);
        Tensor att = t(DType.F32, b * h, tt, tt), logits = t(DType.F32, b * tt, v), wte = t(DType.F32, v, c);
        Tensor losses = t(DType.F32, b * tt), present = t(DType.I32, v), scratch = t(DType.F32, 600);
        Tensor embScratch = t(DType.I32, EmbeddingLauncher.scratchInts(b * tt, v));

        new CastLauncher(recorder).cast(null, x, y);
        ElementwiseLauncher ew = new ElementwiseLauncher(recorder);
        ew.fill(null, x, 1f);
        ew.add(null, x, y, y);
        ew.addBias(null, y, vec, b * tt, c);
        ew.setBias(null, x, vec, b * tt, c);
        ew.biasBackward(null, y, vec, b * tt, c, ColumnSums.plan(b * tt, c, 1, 1, n -> t(DType.F32, n)));
        ew.biasBackward(null, y, vec, b * tt, c, ColumnSums.plan(b * tt, c, 1, 3, n -> t(DType.F32, n)));
        GeluLauncher gelu = new GeluLauncher(recorder);
        gelu.forward(null, x, y);
        gelu.backward(null, x, y, x);
        SwigluLauncher swiglu = new SwigluLauncher(recorder);
        swiglu.forward(null, x, y, y);
        swiglu.backward(null, x, y, x, y, x);
        RmsNormLauncher rms = new RmsNormLauncher(recorder);
        rms.forward(null, x, vec, y, stats, b * tt, c, 1e-5f);
        rms.backward(null, y, x, vec, stats, x, vec, b * tt, c, ColumnSums.plan(b * tt, c, 1, 2, n -> t(DType.F32, n)));
        new RopeLauncher(recorder).rope(null, heads, scratch, scratch, heads, (long) b * h * tt, tt, hd / 2, -1f);
        LayerNormLauncher ln = new LayerNormLauncher(recorder);
        ln.forward(null, x, vec, vec, y, stats, stats, b * tt, c);
        ln.backward(null, y, x, vec, stats, stats, x, vec, vec, b * tt, c,
                ColumnSums.plan(b * tt, c, 2, 2, n -> t(DType.F32, n)));
        AttentionLauncher a = new AttentionLauncher(recorder);
        a.splitHeads(null, qkv, heads, heads, heads, b, tt, h, h, hd);
        a.splitHeadsBackward(null, heads, heads, heads, qkv, b, tt, h, h, hd);
        a.mergeHeads(null, heads, x, b, tt, h, hd);
        a.mergeHeadsBackward(null, x, heads, b, tt, h, hd);
        a.causalSoftmaxForward(null, att, att, (long) b * h * tt, tt, 0.5f);
        a.causalSoftmaxBackward(null, att, att, att, (long) b * h * tt, tt, 0.5f);
        CrossEntropyLauncher ce = new CrossEntropyLauncher(recorder);
        ce.forward(null, logits, stats, losses, b * tt, v);
        ce.backward(null, logits, stats, 0.1f, logits, b * tt, v);
        EmbeddingLauncher emb = new EmbeddingLauncher(recorder);
        emb.forward(null, tokens, wte, wte, y, b, tt, c, v);
        emb.backward(null, tokens, y, wte, wte, embScratch, b, tt, c, v);
        emb.forward(null, tokens, wte, null, y, b, tt, c, v);
        emb.backward(null, tokens, y, wte, null, embScratch, b, tt, c, v);
        OptimizerLauncher opt = new OptimizerLauncher(recorder);
        opt.adamW(null, y, x, y, y, new AdamWStep(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1f));
        opt.sgdMomentum(null, y, x, y, 0.1f, 0.9f, 0f, 1f);
        ReductionLauncher red = new ReductionLauncher(recorder);
        red.scale(null, x, 2f);
        red.sum(null, x, true, scratch, scratch);
        red.sumInto(null, x, false, scratch, 0.5f, t(DType.F32, 1));
        red.nonFinite(null, x, present);

        assertEquals(new TreeSet<>(signatures.keySet()), launched, "kernels no launcher call reached");
    }
}
