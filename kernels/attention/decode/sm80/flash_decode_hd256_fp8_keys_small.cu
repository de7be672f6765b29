// hd256 decode over an FP8 KV cache, warps split over keys and dims (flash_decode_keys_sm80.cuh):
// 32-key tiles, two key groups of two warps, 2 FP8 stages (~51 KB) and registers capped at 128
// (a few spill), so four CTAs fit an SM.
#include "kernels/attention/sm80/flash_decode_keys_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE_KEYS(DecodeHd256Fp8KeysSmall, 256, 32, 4, 2, 2, 4)
