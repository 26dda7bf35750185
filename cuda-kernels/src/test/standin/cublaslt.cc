// The stand-in libcublasLt.so.13: libjnicublas.so needs a library of that name (and its symbol
// version) to load; fsdp4j calls nothing in it.
#include <stddef.h>

extern "C" size_t cublasLtGetVersion() {
    return 130201;
}
