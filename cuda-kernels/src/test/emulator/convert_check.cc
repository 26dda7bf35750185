// Prints what the half and bf16 conversions the emulator was built with do, for
// EmulatorConversionsTest to hold against DType: for each fp32 bit pattern in IN, the fp16 and
// the bf16 bits __float2half_rn / __float2bfloat16_rn give; then for every 16-bit pattern, the
// fp32 bits of __half2float and of __bfloat162float.
//
// usage: convert_check IN OUT   (IN: little-endian uint32s; OUT: uint16 pairs, then uint32 pairs)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdint.h>
#include <string.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: convert_check IN OUT\n");
        return 2;
    }
    FILE* in = fopen(argv[1], "rb");
    FILE* out = fopen(argv[2], "wb");
    if (in == nullptr || out == nullptr) {
        fprintf(stderr, "cannot open %s or %s\n", argv[1], argv[2]);
        return 2;
    }
    uint32_t bits;
    while (fread(&bits, sizeof bits, 1, in) == 1) {
        float f;
        memcpy(&f, &bits, sizeof f);
        __half h = __float2half_rn(f);
        __nv_bfloat16 b = __float2bfloat16_rn(f);
        uint16_t pair[2];
        memcpy(&pair[0], &h, 2);
        memcpy(&pair[1], &b, 2);
        fwrite(pair, sizeof pair, 1, out);
    }
    for (uint32_t x = 0; x < 65536; x++) {
        uint16_t s = static_cast<uint16_t>(x);
        __half h;
        __nv_bfloat16 b;
        memcpy(static_cast<void*>(&h), &s, 2);   // bits in, whatever the type's members
        memcpy(static_cast<void*>(&b), &s, 2);
        float widened[2] = {__half2float(h), __bfloat162float(b)};
        fwrite(widened, sizeof widened, 1, out);
    }
    return fclose(out) == 0 && !ferror(in) ? 0 : 1;
}
