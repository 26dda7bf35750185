// The real NCCL, through JavaCPP's cuda preset (org.bytedeco.cuda.global.nccl): the only class
// that calls it. Communicators cross into Java as addresses so the rest of the module never holds
// a native handle object.
package org.fsdp4j.nccl;

import static org.bytedeco.cuda.global.nccl.ncclAllGather;
import static org.bytedeco.cuda.global.nccl.ncclAllReduce;
import static org.bytedeco.cuda.global.nccl.ncclBfloat16;
import static org.bytedeco.cuda.global.nccl.ncclBroadcast;
import static org.bytedeco.cuda.global.nccl.ncclCommAbort;
import static org.bytedeco.cuda.global.nccl.ncclCommCount;
import static org.bytedeco.cuda.global.nccl.ncclCommDestroy;
import static org.bytedeco.cuda.global.nccl.ncclCommGetAsyncError;
import static org.bytedeco.cuda.global.nccl.ncclCommFinalize;
import static org.bytedeco.cuda.global.nccl.ncclCommInitRankConfig;
import static org.bytedeco.cuda.global.nccl.ncclCommSplit;
import static org.bytedeco.cuda.global.nccl.ncclCommUserRank;
import static org.bytedeco.cuda.global.nccl.ncclFloat16;
import static org.bytedeco.cuda.global.nccl.ncclFloat32;
import static org.bytedeco.cuda.global.nccl.ncclGetErrorString;
import static org.bytedeco.cuda.global.nccl.ncclGetLastError;
import static org.bytedeco.cuda.global.nccl.ncclGetUniqueId;
import static org.bytedeco.cuda.global.nccl.ncclGetVersion;
import static org.bytedeco.cuda.global.nccl.ncclGroupEnd;
import static org.bytedeco.cuda.global.nccl.ncclGroupStart;
import static org.bytedeco.cuda.global.nccl.ncclInt32;
import static org.bytedeco.cuda.global.nccl.ncclReduceScatter;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.cuda.nccl.ncclUniqueId;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;
import org.fsdp4j.api.DType;

final class NativeNccl implements NcclApi {

    /** Bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES). */
    static final int UNIQUE_ID_BYTES = 128;
    /** NCCL_CONFIG_INITIALIZER's magic, and its "leave it to NCCL" value of every int field. */
    private static final int CONFIG_MAGIC = 0xcafebeef;
    private static final int CONFIG_UNDEF_INT = Integer.MIN_VALUE;

    /**
     * The setters of ncclConfig_t's int fields past the header, found by reflection because the
     * fields differ by NCCL version (2.29 has four that 2.27 lacks): a presets upgrade cannot leave a new one at 0.
     */
    static final List<Method> UNDEF_INT_SETTERS = Arrays.stream(ncclConfig_t.class.getDeclaredMethods())
            .filter(m -> Modifier.isNative(m.getModifiers()) && m.getReturnType() == ncclConfig_t.class
                    && Arrays.equals(m.getParameterTypes(), new Class<?>[] {int.class})
                    && !Set.of("magic", "version", "blocking").contains(m.getName()))
            .sorted(Comparator.comparing(Method::getName))
            .toList();

    /** A JavaCPP pointer at a raw address (device buffers, communicators). */
    private static final class Address extends Pointer {
        Address(long address) {
            this.address = address;
        }
    }

    @Override
    public int uniqueId(byte[] out) {
        ncclUniqueId id = new ncclUniqueId();
        int rc = ncclGetUniqueId(id);
        new BytePointer(id).capacity(UNIQUE_ID_BYTES).get(out, 0, UNIQUE_ID_BYTES);
        return rc;
    }

    @Override
    public int commInitRank(long[] commOut, int nranks, byte[] uniqueId, int rank, boolean blocking) {
        ncclUniqueId id = new ncclUniqueId();
        new BytePointer(id).capacity(UNIQUE_ID_BYTES).put(uniqueId, 0, UNIQUE_ID_BYTES);
        ncclComm comm = new ncclComm();
        try (ncclConfig_t config = config(blocking)) {
            int rc = ncclCommInitRankConfig(comm, nranks, id, rank, config);
            commOut[0] = comm.address();
            return rc;
        }
    }

    @Override
    public int commSplit(long comm, int color, int key, long[] commOut, boolean blocking) {
        ncclComm out = new ncclComm();
        try (ncclConfig_t config = config(blocking)) {
            int rc = ncclCommSplit(comm(comm), color, key, out, config);
            commOut[0] = out.address();
            return rc;
        }
    }

    /**
     * NCCL_CONFIG_INITIALIZER with {@code blocking} set: the C macro does not cross into Java, so
     * the header (size, magic, the version of the headers the presets were built with) is written
     * here, and every other field says "NCCL's default" (an int of INT_MIN, a null pointer; a
     * zeroed struct would ask for 0 CTAs).
     */
    static ncclConfig_t config(boolean blocking) {
        ncclConfig_t c = new ncclConfig_t();
        c.size(Loader.sizeof(ncclConfig_t.class)).magic(CONFIG_MAGIC).version(org.bytedeco.cuda.global.nccl.NCCL_VERSION_CODE)
                .blocking(blocking ? 1 : 0).netName(null).commName(null);
        try {
            for (Method setter : UNDEF_INT_SETTERS) {
                setter.invoke(c, CONFIG_UNDEF_INT);
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("ncclConfig_t: " + e, e);
        }
        return c;
    }

    @Override
    public int commFinalize(long comm) {
        return ncclCommFinalize(comm(comm));
    }

    @Override
    public int version(int[] out) {
        return ncclGetVersion(out);
    }

    @Override
    public int commUserRank(long comm, int[] out) {
        return ncclCommUserRank(comm(comm), out);
    }

    @Override
    public int commCount(long comm, int[] out) {
        return ncclCommCount(comm(comm), out);
    }

    @Override
    public int allGather(long send, long recv, long sendCount, DType dtype, long comm, long stream) {
        return ncclAllGather(new Address(send), new Address(recv), sendCount, type(dtype), comm(comm), stream(stream));
    }

    @Override
    public int reduceScatter(long send, long recv, long recvCount, DType dtype, int op, long comm, long stream) {
        return ncclReduceScatter(new Address(send), new Address(recv), recvCount, type(dtype), op, comm(comm), stream(stream));
    }

    @Override
    public int allReduce(long send, long recv, long count, DType dtype, int op, long comm, long stream) {
        return ncclAllReduce(new Address(send), new Address(recv), count, type(dtype), op, comm(comm), stream(stream));
    }

    @Override
    public int broadcast(long send, long recv, long count, DType dtype, int root, long comm, long stream) {
        return ncclBroadcast(new Address(send), new Address(recv), count, type(dtype), root, comm(comm), stream(stream));
    }

    @Override
    public int groupStart() {
        return ncclGroupStart();
    }

    @Override
    public int groupEnd() {
        return ncclGroupEnd();
    }

    @Override
    public int commGetAsyncError(long comm, int[] out) {
        try (IntPointer p = new IntPointer(1)) {
            int rc = ncclCommGetAsyncError(comm(comm), p);
            out[0] = p.get(0);
            return rc;
        }
    }

    @Override
    public int commAbort(long comm) {
        return ncclCommAbort(comm(comm));
    }

    @Override
    public int commDestroy(long comm) {
        return ncclCommDestroy(comm(comm));
    }

    @Override
    public String errorString(int result) {
        BytePointer s = ncclGetErrorString(result);
        return s == null ? "unknown NCCL result " + result : s.getString();
    }

    @Override
    public String lastError(long comm) {
        BytePointer s = ncclGetLastError(comm(comm));
        return s == null ? "" : s.getString();
    }

    private static CUstream_st stream(long address) {
        return new CUstream_st(new Address(address));
    }

    private static ncclComm comm(long address) {
        return new ncclComm(new Address(address));
    }

    /** ncclDataType_t of a dtype that travels. */
    static int type(DType dtype) {
        switch (dtype) {
            case F32: return ncclFloat32;
            case F16: return ncclFloat16;
            case BF16: return ncclBfloat16;
            case I32: return ncclInt32;
            default: throw new IllegalArgumentException("NCCL has no type for " + dtype);
        }
    }
}
