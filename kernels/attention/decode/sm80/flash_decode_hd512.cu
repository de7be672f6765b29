// hd512 decode: 16-key tiles, 4 warps (128 head dims each), 2 stages (89 KB: two CTAs per SM on
// H100, and it fits the ~100 KB parts). Measured on H100 it streams as fast as the 32-key,
// 3-stage "deep" variant at batch 1 and 8% faster at batch 16 (docs/results-log/general.md).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512, 512, 16, 4, 2)
