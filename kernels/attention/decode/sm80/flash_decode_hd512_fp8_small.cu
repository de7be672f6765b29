// hd512 decode over an FP8 KV cache for ~100 KB shared-memory parts (sm_86, sm_89): 16-key tiles,
// 2 FP8 staging stages (90 KB).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Fp8Small, 512, 16, 4, 2, true)
