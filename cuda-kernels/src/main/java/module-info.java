// The CUDA backend: found through the core's BackendProvider service, so nothing outside it names
// its classes but NCCL (which moves its device buffers) and the command line (its probes).
module org.fsdp4j.cuda {
    requires org.fsdp4j.core;
    requires org.bytedeco.javacpp;
    requires org.bytedeco.cuda;

    exports org.fsdp4j.cuda to org.fsdp4j.nccl, org.fsdp4j.cli;

    provides org.fsdp4j.backend.BackendProvider with org.fsdp4j.cuda.CudaBackendProvider;
}
