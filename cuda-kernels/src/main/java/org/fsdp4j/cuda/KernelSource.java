// Where launchers get their kernels by extern "C" name: the loaded module, or a test recorder.
package org.fsdp4j.cuda;

interface KernelSource {

    Kernel kernel(String name);
}
