// The core's boundary: a program sees org.fsdp4j.api, and a backend or communicator of its own
// implements the two SPI packages (backend, comm); everything else is the engine, open only to
// fsdp4j's own modules (the CUDA backend, NCCL, the command line), so a user cannot come to
// depend on it. Jackson reads and writes the records of the packages it is opened to.
module org.fsdp4j.core {
    requires transitive com.fasterxml.jackson.databind;
    requires jdk.incubator.vector;
    requires java.management;
    requires static jdk.management;
    requires org.bytedeco.javacpp;
    requires org.bytedeco.openblas;
    requires ai.djl.api;
    requires ai.djl.tokenizers;

    exports org.fsdp4j.api;
    exports org.fsdp4j.backend;
    exports org.fsdp4j.comm;

    exports org.fsdp4j.backend.cpu to org.fsdp4j.cuda, org.fsdp4j.cli;
    exports org.fsdp4j.bench to org.fsdp4j.cli;
    exports org.fsdp4j.checkpoint to org.fsdp4j.cli;
    exports org.fsdp4j.data to org.fsdp4j.cli;
    exports org.fsdp4j.dist to org.fsdp4j.cli;
    exports org.fsdp4j.metrics to org.fsdp4j.cli;
    exports org.fsdp4j.model to org.fsdp4j.cli;
    exports org.fsdp4j.plan to org.fsdp4j.cli;
    exports org.fsdp4j.train to org.fsdp4j.cli;
    exports org.fsdp4j.weights to org.fsdp4j.cli;

    opens org.fsdp4j.checkpoint to com.fasterxml.jackson.databind;
    opens org.fsdp4j.model to com.fasterxml.jackson.databind;
    opens org.fsdp4j.metrics to com.fasterxml.jackson.databind;
    opens org.fsdp4j.plan to com.fasterxml.jackson.databind;
    opens org.fsdp4j.train to com.fasterxml.jackson.databind;

    uses org.fsdp4j.api.FsdpRuntime;
    uses org.fsdp4j.backend.BackendProvider;
    uses org.fsdp4j.comm.RankGroupProvider;

    provides org.fsdp4j.api.FsdpRuntime with org.fsdp4j.runtime.EngineRuntime;
    provides org.fsdp4j.backend.BackendProvider with org.fsdp4j.backend.cpu.CpuBackendProvider;
}
