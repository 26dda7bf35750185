// The stand-in CUDA is strict where a GPU fails (or would fail later, or never say): each mistake
// below, made through the same JavaCPP calls the backend makes, is an error with CUDA's own code,
// never a silent success. Queued work that faults (an unaligned or freed pointer, a write past an
// allocation) leaves a sticky error, as a GPU's context does, until cudaDeviceReset. And the
// device the stand-in reports reads back field for field through JavaCPP's cudaDeviceProp, so its
// layout is CUDA 13's. Fake-GPU run only (tag "standin").
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F;
import static org.bytedeco.cuda.global.cublas.CUBLAS_GEMM_DEFAULT;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_N;
import static org.bytedeco.cuda.global.cublas.CUBLAS_STATUS_INVALID_VALUE;
import static org.bytedeco.cuda.global.cublas.cublasCreate_v2;
import static org.bytedeco.cuda.global.cublas.cublasDestroy_v2;
import static org.bytedeco.cuda.global.cublas.cublasGemmEx;
import static org.bytedeco.cuda.global.cublas.cublasSetStream_v2;
import static org.bytedeco.cuda.global.cudart.CUDA_ERROR_INVALID_HANDLE;
import static org.bytedeco.cuda.global.cudart.CUDA_R_32F;
import static org.bytedeco.cuda.global.cudart.cuCtxSetCurrent;
import static org.bytedeco.cuda.global.cudart.cuDevicePrimaryCtxRetain;
import static org.bytedeco.cuda.global.cudart.cuInit;
import static org.bytedeco.cuda.global.cudart.cuLaunchKernel;
import static org.bytedeco.cuda.global.cudart.cuModuleGetFunction;
import static org.bytedeco.cuda.global.cudart.cuModuleLoadData;
import static org.bytedeco.cuda.global.cudart.cudaDeviceReset;
import static org.bytedeco.cuda.global.cudart.cudaErrorIllegalAddress;
import static org.bytedeco.cuda.global.cudart.cudaErrorInvalidResourceHandle;
import static org.bytedeco.cuda.global.cudart.cudaErrorInvalidValue;
import static org.bytedeco.cuda.global.cudart.cudaErrorMisalignedAddress;
import static org.bytedeco.cuda.global.cudart.cudaErrorNotPermitted;
import static org.bytedeco.cuda.global.cudart.cudaEventCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaEventRecord;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaGetDeviceProperties;
import static org.bytedeco.cuda.global.cudart.cudaMalloc;
import static org.bytedeco.cuda.global.cudart.cudaMallocHost;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyAsync;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyHostToDevice;
import static org.bytedeco.cuda.global.cudart.cudaSetDevice;
import static org.bytedeco.cuda.global.cudart.cudaStreamCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaStreamNonBlocking;
import static org.bytedeco.cuda.global.cudart.cudaStreamSynchronize;
import static org.bytedeco.cuda.global.cudart.cudaSuccess;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.cuda.cublas.cublasContext;
import org.bytedeco.cuda.cudart.CUctx_st;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUmod_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.cudart.cudaDeviceProp;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.fsdp4j.api.MemoryTracker;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("standin")
class StandInStrictnessTest {

    private CudaProbe.Result probe;

    /** cuda:d current for the runtime and the driver (its primary context retained), as the backend does it. */
    private static void enter(int d) {
        assertEquals(cudaSuccess, cudaSetDevice(d));
        assertEquals(0, cuInit(0));
        CUctx_st ctx = new CUctx_st();
        assertEquals(0, cuDevicePrimaryCtxRetain(ctx, d));
        assertEquals(0, cuCtxSetCurrent(ctx));
    }

    private static CUstream_st stream() {
        CUstream_st s = new CUstream_st();
        assertEquals(cudaSuccess, cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
        return s;
    }

    private static long malloc(long bytes) {
        Pointer p = new Pointer();
        assertEquals(cudaSuccess, cudaMalloc(p, bytes));
        return p.address();
    }

    @AfterEach
    void reset() {
        if (probe != null) {
            for (int d = 0; d < probe.deviceCount(); d++) {
                cudaSetDevice(d);
                cudaDeviceReset();
            }
            cudaSetDevice(0);
        }
    }

    @Test
    void theDeviceIsTheStandInWithAnH100sLimitsReadFieldForField() {
        probe = StandIns.assumeStandIns();
        assertTrue(probe.describe().contains("stand-in CUDA, not a GPU"), probe.describe());
        cudaDeviceProp p = new cudaDeviceProp();
        assertEquals(cudaSuccess, cudaGetDeviceProperties(p, 0));
        assertEquals(CudaProbe.STAND_IN_NAME, p.name().getString());
        assertEquals(9, p.major());
        assertEquals(0, p.minor());
        assertEquals(132, p.multiProcessorCount());
        assertEquals(1024, p.maxThreadsPerBlock());
        assertEquals(32, p.warpSize());
        assertEquals(65535, p.maxGridSize(1));
        assertEquals(4096L << 20, p.totalGlobalMem());
        assertEquals(1, p.unifiedAddressing());
        assertEquals(2, probe.deviceCount(), "the fake-GPU run asks for two stand-in devices");
    }

    @Test
    void aLeadingDimensionBelowTheRowsAsStoredIsInvalid() {
        probe = StandIns.assumeStandIns();
        enter(0);
        int m = 8, n = 8, k = 16;
        long a = malloc(4L * m * k), b = malloc(4L * k * n), c = malloc(4L * m * n);
        cublasContext h = new cublasContext();
        assertEquals(0, cublasCreate_v2(h));
        assertEquals(0, cublasSetStream_v2(h, stream()));
        try (FloatPointer one = new FloatPointer(1f); FloatPointer zero = new FloatPointer(0f)) {
            // column-major A is m×k: lda must be ≥ m; B is k×n: ldb ≥ k (here given n, the transposed one's)
            int ok = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, one, new DevicePointer(a), CUDA_R_32F, m,
                    new DevicePointer(b), CUDA_R_32F, k, zero, new DevicePointer(c), CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT);
            assertEquals(0, ok);
            int bad = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, one, new DevicePointer(a), CUDA_R_32F, m,
                    new DevicePointer(b), CUDA_R_32F, n, zero, new DevicePointer(c), CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT);
            assertEquals(CUBLAS_STATUS_INVALID_VALUE, bad);
        }
        assertEquals(0, cublasDestroy_v2(h));
    }

    @Test
    void anUnalignedPointerFaultsTheKernel() {
        probe = StandIns.assumeStandIns();
        enter(0);
        long buffer = malloc(1024);
        CUstream_st s = stream();
        launchFill(s, buffer + 2, 16);   // a float* two bytes into an allocation
        assertEquals(cudaErrorMisalignedAddress, cudaStreamSynchronize(s), "sticky until reset");
        assertEquals(cudaErrorMisalignedAddress, cudaStreamSynchronize(s));
    }

    @Test
    void aFreedPointerAndAWritePastTheEndAreIllegalAddresses() {
        probe = StandIns.assumeStandIns();
        enter(0);
        long freed = malloc(1024);
        assertEquals(cudaSuccess, cudaFree(new DevicePointer(freed)));
        assertEquals(cudaErrorInvalidValue, cudaFree(new DevicePointer(freed)), "a second cudaFree");
        CUstream_st s = stream();
        launchFill(s, freed, 16);
        assertEquals(cudaErrorIllegalAddress, cudaStreamSynchronize(s));
        reset();
        enter(0);
        long small = malloc(64);           // 16 floats
        CUstream_st t = stream();
        launchFill(t, small, 17);          // one float too many: the guard bytes after it are hit
        assertEquals(cudaErrorIllegalAddress, cudaStreamSynchronize(t));
    }

    @Test
    void aCopyPastItsAllocationIsInvalid() {
        probe = StandIns.assumeStandIns();
        enter(0);
        long d = malloc(256);
        Pointer host = new Pointer();
        assertEquals(cudaSuccess, cudaMallocHost(host, 512));
        CUstream_st s = stream();
        assertEquals(cudaSuccess, cudaMemcpyAsync(new DevicePointer(d), host, 256, cudaMemcpyHostToDevice, s));
        assertEquals(cudaErrorInvalidValue, cudaMemcpyAsync(new DevicePointer(d + 128), host, 256,
                cudaMemcpyHostToDevice, s), "128 bytes past the end");
        assertEquals(cudaSuccess, cudaStreamSynchronize(s), "a refused copy is not sticky");
    }

    @Test
    void aStreamOrEventOfAnotherDeviceIsAnError() {
        probe = StandIns.assumeStandIns();
        assumeTrue(probe.deviceCount() >= 2);
        enter(1);
        CUstream_st onOne = stream();
        enter(0);
        CUstream_st onZero = stream();
        CUevent_st event = new CUevent_st();
        assertEquals(cudaSuccess, cudaEventCreateWithFlags(event, 0));
        assertEquals(cudaSuccess, cudaEventRecord(event, onZero));
        assertEquals(cudaErrorInvalidResourceHandle, cudaEventRecord(event, onOne), "cuda:1's stream, cuda:0 current");
        long buffer = malloc(1024);
        assertEquals(CUDA_ERROR_INVALID_HANDLE, launchFillRc(onOne, buffer, 16));
    }

    @Test
    void aHostFunctionMayNotCallCuda() {
        probe = StandIns.assumeStandIns();
        MemoryTracker tracker = new MemoryTracker("strict");
        try (CudaBackend be = new CudaBackend(0, tracker, CudaOptions.defaults())) {
            AtomicInteger rc = new AtomicInteger(-1);
            be.computeStream().launchHostFunc(() -> rc.set(cudaMalloc(new Pointer(), 16)));
            be.computeStream().synchronize();
            assertEquals(cudaErrorNotPermitted, rc.get());
        }
    }

    private static void launchFill(CUstream_st s, long out, long n) {
        assertEquals(0, launchFillRc(s, out, n));
    }

    /** cuLaunchKernel of fill_kernel(out, DT_F32, n, 1.5f), one block of 256 threads, from the module's image. */
    private static int launchFillRc(CUstream_st s, long out, long n) {
        CUmod_st module = new CUmod_st();
        try (BytePointer image = new BytePointer(KernelImage.bytes().orElseThrow())) {
            assertEquals(0, cuModuleLoadData(module, image));
        }
        CUfunc_st fill = new CUfunc_st();
        assertEquals(0, cuModuleGetFunction(fill, module, "fill_kernel"));
        KernelArgs args = new KernelArgs().pack(out, 0, n, 1.5f);
        return cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, s, args.slots(), (PointerPointer<?>) null);
    }
}
