// hd256 decode over an FP8 KV cache for ~100 KB shared-memory parts (sm_86, sm_89): 32-key tiles,
// 2 FP8 staging stages (88 KB).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8Small, 256, 32, 4, 2, true)
