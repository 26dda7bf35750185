// The one exception type for failed CUDA runtime/driver and cuBLAS calls: it names the
// library, the call, the error (name and text) and the device, so a log line is enough.
package org.fsdp4j.cuda;

public final class CudaException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String library;
    private final String call;
    private final int code;
    private final String errorName;
    private final int device;

    public CudaException(String library, String call, int code, String errorName, String errorText, int device) {
        super(library + " call " + call + " failed on cuda:" + device + ": " + errorName + " (" + code + "): "
                + errorText);
        this.library = library;
        this.call = call;
        this.code = code;
        this.errorName = errorName;
        this.device = device;
    }

    /** "cudart", "driver" or "cublas". */
    public String library() {
        return library;
    }

    public String call() {
        return call;
    }

    public int code() {
        return code;
    }

    public String errorName() {
        return errorName;
    }

    public int device() {
        return device;
    }
}
