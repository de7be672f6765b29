// hd256 decode over an FP8 KV cache, 2 stages (54 KB): the registry's alternative for parts
// where the 3-stage kernel's occupancy is short (GANNET_FORCE_KERNEL=sm80_hd256_fp8_split_small).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8Small, 256, 32, 4, 2, true)
