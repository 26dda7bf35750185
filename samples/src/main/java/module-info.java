// The command line (org.fsdp4j.cli) and the library example (example.mixer). picocli fills the
// commands' option fields by reflection, and Jackson writes the records the commands report.
module org.fsdp4j.cli {
    requires org.fsdp4j.core;
    requires org.fsdp4j.cuda;
    requires info.picocli;
    requires java.desktop;
    requires java.management;
    requires jdk.unsupported;
    requires me.tongfei.progressbar;
    requires org.jfree.jfreechart;

    opens org.fsdp4j.cli to info.picocli, com.fasterxml.jackson.databind;
}
