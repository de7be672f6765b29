// hd256 decode over an FP8 KV cache with the keys on the MMA's M (flash_decode_kmajor_sm80.cuh):
// 4 warps of 16 keys, 2 FP8 stages of 64 keys (~73 KB) and 160 registers: three CTAs per SM.
#include "kernels/attention/sm80/flash_decode_kmajor_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE_KMAJOR(DecodeHd256Fp8KMajor, 256, 4, 2, 3)
