// NCCL collectives for ranks on several GPUs, found through the core's RankGroupProvider service:
// it exports nothing.
module org.fsdp4j.nccl {
    requires org.fsdp4j.core;
    requires org.fsdp4j.cuda;
    requires org.bytedeco.javacpp;
    requires org.bytedeco.cuda;

    provides org.fsdp4j.comm.RankGroupProvider with org.fsdp4j.nccl.NcclGroupProvider;
}
