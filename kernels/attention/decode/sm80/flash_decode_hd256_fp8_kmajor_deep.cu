// hd256 decode over an FP8 KV cache with the keys on the MMA's M (flash_decode_kmajor_sm80.cuh):
// 4 warps of 16 keys, 3 FP8 stages of 64 keys (~107 KB): two CTAs per SM, deeper prefetch.
#include "kernels/attention/sm80/flash_decode_kmajor_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE_KMAJOR(DecodeHd256Fp8KMajorDeep, 256, 4, 3, 2)
