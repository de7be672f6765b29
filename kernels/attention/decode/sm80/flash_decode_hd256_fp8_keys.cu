// hd256 decode over an FP8 KV cache, warps split over keys and dims (flash_decode_keys_sm80.cuh):
// 32-key tiles, two key groups of two warps, 3 FP8 stages (~69 KB, ~160 registers: three CTAs per
// SM).
#include "kernels/attention/sm80/flash_decode_keys_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE_KEYS(DecodeHd256Fp8Keys, 256, 32, 4, 3, 2, 1)
